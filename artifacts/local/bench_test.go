package local

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rlpipe/rlpipe/artifacts"
)

func benchStore(b *testing.B) *Store {
	b.Helper()
	s, err := Create(context.Background(), filepath.Join(b.TempDir(), "store"), "main", nil)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// fill writes n objects of size bytes each (distinct random content) and commits.
func fill(b *testing.B, s *Store, n, size int) {
	b.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), uint64(size)))
	buf := make([]byte, size)
	for i := range n {
		for j := 0; j+8 <= len(buf); j += 8 {
			v := rng.Uint64()
			for k := 0; k < 8; k++ {
				buf[j+k] = byte(v >> (8 * k))
			}
		}
		p := fmt.Sprintf("iterations/%06d/trajectories.parquet", i)
		if _, err := s.PutObject(context.Background(), "main", p, bytes.NewReader(buf), nil); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.Commit(context.Background(), "main", "fill", nil); err != nil {
		b.Fatal(err)
	}
}

func timeBranches(b *testing.B, s *Store, prefix string, n int) time.Duration {
	start := time.Now()
	for i := range n {
		if _, err := s.CreateBranch(context.Background(), fmt.Sprintf("%s%d", prefix, i), "main"); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start) / time.Duration(n)
}

// BenchmarkBranchCreate compares branch creation in a store holding 1 MiB
// of artifacts with one holding 1 GiB: creation copies nothing, so the
// ratio should stay near 1 (target ≤ 1.2).
func BenchmarkBranchCreate(b *testing.B) {
	small, large := benchStore(b), benchStore(b)
	fill(b, small, 16, 64<<10)  // 1 MiB
	fill(b, large, 1024, 1<<20) // 1 GiB
	const n = 200
	loop := 0
	for b.Loop() {
		loop++
		var ts, tl time.Duration
		for round := 0; round < 3; round++ { // interleave to share the machine's noise
			p := fmt.Sprintf("l%d-r%d-", loop, round)
			ts += timeBranches(b, small, p, n)
			tl += timeBranches(b, large, p, n)
		}
		b.ReportMetric(float64(ts.Microseconds())/3, "small_us/branch")
		b.ReportMetric(float64(tl.Microseconds())/3, "large_us/branch")
		b.ReportMetric(float64(tl)/float64(ts), "large/small")
	}
}

// stageBulk writes n staged entries in one transaction (the blobs are not
// needed to measure commit and diff).
func stageBulk(b *testing.B, s *Store, branch string, paths []string, version string) {
	b.Helper()
	err := s.update(context.Background(), func(tx *bolt.Tx) error {
		st, err := tx.Bucket(bucketStaging).CreateBucketIfNotExists([]byte(branch))
		if err != nil {
			return err
		}
		for _, p := range paths {
			e := &entry{Path: p, Digest: digestOf([]byte(p + version)), Size: 1, Mtime: 1}
			if err := putJSON(st, []byte(p), staged{Entry: e}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

func paths(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("iterations/%06d/part-%d.parquet", i/8, i%8)
	}
	return out
}

// BenchmarkCommit1000 commits 1,000 staged objects on top of 10,000.
func BenchmarkCommit1000(b *testing.B) {
	s := benchStore(b)
	stageBulk(b, s, "main", paths(10000), "v0")
	if _, err := s.Commit(context.Background(), "main", "base", nil); err != nil {
		b.Fatal(err)
	}
	all := paths(20000)[10000:]
	i := 0
	for b.Loop() {
		b.StopTimer()
		stageBulk(b, s, "main", all[:1000], fmt.Sprint(i))
		i++
		b.StartTimer()
		if _, err := s.Commit(context.Background(), "main", "1000 objects", nil); err != nil {
			b.Fatal(err)
		}
	}
}

// diffCost builds a tree of size paths, changes 10 of them on a branch and
// returns the mean time of a two-dot diff between the two.
func diffCost(b *testing.B, size, reps int) time.Duration {
	s := benchStore(b)
	ps := paths(size)
	stageBulk(b, s, "main", ps, "v0")
	if _, err := s.Commit(context.Background(), "main", "base", nil); err != nil {
		b.Fatal(err)
	}
	if _, err := s.CreateBranch(context.Background(), "edit", "main"); err != nil {
		b.Fatal(err)
	}
	var changed []string
	for i := 0; i < 10; i++ {
		changed = append(changed, ps[i*size/10+5])
	}
	stageBulk(b, s, "edit", changed, "v1")
	if _, err := s.Commit(context.Background(), "edit", "ten", nil); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for range reps {
		s.cache = newTreeCache() // measure reads, not the cache
		n := 0
		for _, err := range s.Diff(context.Background(), "main", "edit", &artifacts.DiffOptions{TwoDot: true}) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 10 {
			b.Fatalf("diff found %d changes, want 10", n)
		}
	}
	return time.Since(start) / time.Duration(reps)
}

// BenchmarkDiff10Changes diffs two commits that differ in 10 paths, in a
// tree of 10,000 paths and one of 100,000: the cost follows the changes,
// so the ratio should stay far below the 10× difference in size.
func BenchmarkDiff10Changes(b *testing.B) {
	for b.Loop() {
		small := diffCost(b, 10000, 50)
		large := diffCost(b, 100000, 50)
		b.ReportMetric(float64(small.Microseconds()), "10k_us/diff")
		b.ReportMetric(float64(large.Microseconds()), "100k_us/diff")
		b.ReportMetric(float64(large)/float64(small), "100k/10k")
	}
}

// BenchmarkGetObject256MiB reads a 256 MiB object whole, as `rlpipe cat`
// and `rlpipe export` do, with the digest checks GetObject makes. It
// reports the throughput and the time to the first byte.
func BenchmarkGetObject256MiB(b *testing.B) {
	s := benchStore(b)
	const size = 256 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	ctx := context.Background()
	if _, err := s.PutObject(ctx, "main", "big.bin", bytes.NewReader(data), nil); err != nil {
		b.Fatal(err)
	}
	data = nil
	b.SetBytes(size)
	b.ReportAllocs()
	var first time.Duration
	for b.Loop() {
		start := time.Now()
		rc, _, err := s.GetObject(ctx, "main", "big.bin")
		if err != nil {
			b.Fatal(err)
		}
		var one [1]byte
		if _, err := io.ReadFull(rc, one[:]); err != nil {
			b.Fatal(err)
		}
		first += time.Since(start)
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil || n != size-1 {
			b.Fatalf("read %d bytes: %v", n+1, err)
		}
	}
	b.ReportMetric(float64(first.Milliseconds())/float64(b.N), "ms-to-first-byte/op")
}

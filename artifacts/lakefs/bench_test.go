package lakefs_test

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
)

// EnvBenchBytes sets the size of BenchmarkPresignedVsAPI's object.
const envBenchBytes = "RLPIPE_BENCH_LAKEFS_BYTES"

// BenchmarkPresignedVsAPI puts a large object (512 MiB, or
// $RLPIPE_BENCH_LAKEFS_BYTES) from a file and reads it back whole, once
// through presigned transfers to the server's block store and once
// through the lakeFS API, each against its own embedded store served by
// storeserver on loopback (so that neither deduplicates the other's
// bytes). It reports the seconds of each and the ratios api/presigned.
// The stand-in's link copies the uploaded block into the store, which a
// lakeFS over S3 does not (its link records the address), so the
// presigned upload here pays one copy more than on lakeFS.
func BenchmarkPresignedVsAPI(b *testing.B) {
	size := int64(512 << 20)
	if v := os.Getenv(envBenchBytes); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want a size in bytes", envBenchBytes, v)
		}
		size = n
	}
	file := filepath.Join(b.TempDir(), "shard.safetensors")
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.NewChaCha8([32]byte{7})
	if _, err := io.CopyN(f, rng, size); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}

	open := func(presign bool) *lakefs.Store {
		backing := artifactstest.NewLocalNamed(b, "bench")
		opts := &storeserver.Options{}
		threshold := int64(-1)
		if presign {
			opts.BlockStore = artifactstest.ServeBlockStore(b, storeserver.BlockStoreOptions{})
			threshold = 0 // the default
		}
		srv, err := storeserver.New(context.Background(), backing, opts)
		if err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		b.Cleanup(hs.Close)
		return artifactstest.OpenLakeFSWith(b, lakefs.Config{Endpoint: hs.URL, PresignThreshold: threshold}, srv.Repository(), nil)
	}
	stores := map[string]*lakefs.Store{"presigned": open(true), "api": open(false)}
	ctx := context.Background()
	secs := map[string]float64{}
	b.SetBytes(2 * size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Alternate which goes first, so that neither always meets a
		// warmer page cache.
		order := []string{"presigned", "api"}
		if i%2 == 1 {
			order = []string{"api", "presigned"}
		}
		for _, name := range order {
			st := stores[name]
			path := "w/" + strconv.Itoa(i) + ".safetensors"
			in, err := os.Open(file)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if _, err := st.PutObject(ctx, "main", path, in, nil); err != nil {
				b.Fatalf("%s put: %v", name, err)
			}
			put := time.Since(start)
			in.Close()
			start = time.Now()
			rc, _, err := st.GetObject(ctx, "main", path)
			if err != nil {
				b.Fatalf("%s get: %v", name, err)
			}
			n, err := io.Copy(io.Discard, rc)
			rc.Close()
			if err != nil || n != size {
				b.Fatalf("%s read %d of %d bytes: %v", name, n, size, err)
			}
			get := time.Since(start)
			secs[name+"_put"] += put.Seconds()
			secs[name+"_get"] += get.Seconds()
		}
	}
	b.StopTimer()
	n := float64(b.N)
	for k, v := range secs {
		b.ReportMetric(v/n, k+"_s")
	}
	b.ReportMetric(secs["api_put"]/secs["presigned_put"], "api/presigned_put")
	b.ReportMetric(secs["api_get"]/secs["presigned_get"], "api/presigned_get")
	b.ReportMetric((secs["api_put"]+secs["api_get"])/(secs["presigned_put"]+secs["presigned_get"]), "api/presigned")
}

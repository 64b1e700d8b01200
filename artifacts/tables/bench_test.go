package tables

import (
	"bufio"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/internal/benchtext"
	"github.com/rlpipe/rlpipe/internal/heappeak"
)

// synthTrajectories fills rows with deterministic synthetic trajectories
// starting at row index first: ~590-character completions of words drawn
// from a small vocabulary (benchtext), 16 token ids and logprobs, eight
// samples per prompt.
type synthTrajectories struct {
	words   *benchtext.Words
	prompts []string
}

func newSynth() *synthTrajectories {
	r := rand.New(rand.NewPCG(1, 2))
	s := &synthTrajectories{words: benchtext.New(r)}
	for i := 0; i < 1000; i++ {
		s.prompts = append(s.prompts, "Solve problem "+strconv.Itoa(i)+": "+s.words.Text(r, 80))
	}
	return s
}

func (s *synthTrajectories) fill(rows []Trajectory, first int) {
	for k := range rows {
		i := first + k
		r := rand.New(rand.NewPCG(uint64(i), 7))
		p := i / 8
		pid := "p" + strconv.Itoa(p)
		ids := make([]int32, 16)
		lps := make([]float32, 16)
		for j := range ids {
			ids[j] = int32(r.IntN(150000))
			lps[j] = -r.Float32() * 4
		}
		rows[k] = Trajectory{
			PromptID:      pid,
			SampleIndex:   int32(i % 8),
			GroupID:       "it0/" + pid,
			Completion:    s.words.Text(r, 590),
			Turns:         []Turn{{Role: "user", Content: s.prompts[p%len(s.prompts)]}},
			TokenIDs:      ids,
			Logprobs:      lps,
			FinishReason:  "stop",
			NumTokens:     int32(140 + r.IntN(20)),
			PolicyVersion: "qwen2.5-0.5b+sha256:4f2a",
			Sampler:       `{"temperature":1,"top_p":1,"max_tokens":1024}`,
			Seed:          int64(i),
			Staleness:     int32(i % 3),
			Status:        StatusOK,
		}
		if i%100 == 99 {
			rows[k].Status = StatusTimeout
			rows[k].Error = ptr("deadline exceeded")
		}
	}
}

// BenchmarkTrajectories1M writes one million trajectories to a temporary
// file, reads them back as Arrow batches and as rows, and reads only the
// completion column page by page with parquet-go: the floor, the cheapest
// read of the same bytes. Run it with -benchtime 1x.
func BenchmarkTrajectories1M(b *testing.B) {
	const total = 1_000_000
	const batch = 4096
	b.ReportAllocs()
	synth := newSynth()
	path := filepath.Join(b.TempDir(), "trajectories.parquet")
	rows := make([]Trajectory, batch)
	var writeTime, readRecTime, readRowTime, floorTime time.Duration
	var size int64
	var writePeak, readPeak uint64
	ctx := context.Background()
	for it := 0; it < b.N; it++ {
		// Write.
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		hp := heappeak.Start()
		w, err := NewWriter(bw, Trajectories, nil)
		if err != nil {
			b.Fatal(err)
		}
		for first := 0; first < total; first += batch {
			n := min(batch, total-first)
			synth.fill(rows[:n], first)
			start := time.Now()
			if err := w.Write(rows[:n]...); err != nil {
				b.Fatal(err)
			}
			writeTime += time.Since(start)
		}
		start := time.Now()
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		writeTime += time.Since(start)
		writePeak = max(writePeak, hp.Stop())
		st, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		size = st.Size()

		rf, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		// Read Arrow batches (every column).
		hp = heappeak.Start()
		start = time.Now()
		rd, err := NewReader(rf, size, path, Trajectories, nil)
		if err != nil {
			b.Fatal(err)
		}
		var n int64
		for rec, err := range rd.Records(ctx) {
			if err != nil {
				b.Fatal(err)
			}
			n += rec.NumRows()
		}
		readRecTime += time.Since(start)
		if n != total {
			b.Fatalf("read %d records' rows, want %d", n, total)
		}
		// Read typed rows.
		start = time.Now()
		n = 0
		var chars int
		for row, err := range rd.Rows(ctx) {
			if err != nil {
				b.Fatal(err)
			}
			n++
			chars += len(row.Completion)
		}
		readRowTime += time.Since(start)
		readPeak = max(readPeak, hp.Stop())
		if n != total {
			b.Fatalf("read %d rows, want %d", n, total)
		}
		// The floor: the completion column alone, page by page.
		start = time.Now()
		var floorChars int
		if err := pgStrings(rf, size, "completion", func(s string) { floorChars += len(s) }); err != nil {
			b.Fatal(err)
		}
		floorTime += time.Since(start)
		if floorChars != chars {
			b.Fatalf("floor read %d completion bytes, rows %d", floorChars, chars)
		}
		rf.Close()
	}
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	mb := float64(size) / (1 << 20)
	b.ReportMetric(mb, "file_MB")
	b.ReportMetric(total/per(writeTime), "write_rows/s")
	b.ReportMetric(mb/per(writeTime), "write_MB/s")
	b.ReportMetric(total/per(readRecTime), "read_rows/s")
	b.ReportMetric(mb/per(readRecTime), "read_MB/s")
	b.ReportMetric(total/per(readRowTime), "read_typed_rows/s")
	b.ReportMetric(float64(readRecTime)/float64(floorTime), "read_vs_floor_x")
	b.ReportMetric(float64(readRowTime)/float64(floorTime), "read_typed_vs_floor_x")
	b.ReportMetric(float64(writePeak)/(1<<20), "write_peak_heap_MB")
	b.ReportMetric(float64(readPeak)/(1<<20), "read_peak_heap_MB")
}

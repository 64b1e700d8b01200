package prodsize_test

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/internal/benchtext"
	"github.com/rlpipe/rlpipe/internal/heappeak"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
)

// The shape of a production-size iteration: 512 prompts × 16 samples of
// 2,048 tokens.
const (
	iterRows   = 8192
	iterTokens = 2048
	groupSize  = 16
)

// rawMB is the token ids and logprobs of an iteration, in MiB.
const rawMB = float64(iterRows*iterTokens*(4+4)) / (1 << 20)

// iteration is a production-size iteration's trajectories, the same on
// every run: token ids and logprobs from benchtext.Tokens, short text.
func iteration() []tables.Trajectory {
	rows := make([]tables.Trajectory, iterRows)
	for i := range rows {
		r := rand.New(rand.NewPCG(uint64(i), 39))
		ids, lps := make([]int32, iterTokens), make([]float32, iterTokens)
		benchtext.Tokens(r, ids, lps)
		pid := "p" + strconv.Itoa(i/groupSize)
		rows[i] = tables.Trajectory{
			PromptID:      pid,
			SampleIndex:   int32(i % groupSize),
			GroupID:       "it1/" + pid,
			Completion:    "The answer is " + strconv.Itoa(r.IntN(10000)) + ".",
			TokenIDs:      ids,
			Logprobs:      lps,
			FinishReason:  "length",
			NumTokens:     iterTokens,
			PolicyVersion: "qwen2.5-0.5b+sha256:4f2a",
			Sampler:       `{"temperature":1,"top_p":1,"max_tokens":2048}`,
			Seed:          int64(i),
			Status:        tables.StatusOK,
		}
	}
	return rows
}

// phases are the seconds and peak heaps (above the heap before, in
// bytes) of one pass of rlpipe's path.
type phases struct {
	write, put, get, read                      time.Duration
	writePeak, storePeak, readPeak, streamPeak uint64
	fileBytes                                  int64
}

func (p phases) total() time.Duration { return p.write + p.put + p.get + p.read }

// rlpipePass takes rows through rlpipe's path once: written by the
// generate stage's writer to a local file, staged and committed, read
// back to another local file as the executor downloads an input, and
// read by the trainer. dir is scratch on the disk the store is on. start
// starts the heap sampler of each phase.
func rlpipePass(b *testing.B, st artifacts.Store, rows []tables.Trajectory, dir string, pass int, start func() *heappeak.Sampler) phases {
	b.Helper()
	ctx := context.Background()
	var p phases
	gen := filepath.Join(dir, "generate.parquet")
	const object = "runs/prod/iterations/000001/trajectories.parquet"

	hp := start()
	begin := time.Now()
	if err := tables.WriteFile(gen, tables.Trajectories, rows, nil); err != nil {
		b.Fatalf("write %s: %v", gen, err)
	}
	p.write = time.Since(begin)
	p.writePeak = hp.Stop() - hp.Base()

	hp = start()
	begin = time.Now()
	f, err := os.Open(gen)
	if err != nil {
		b.Fatal(err)
	}
	info, err := st.PutObject(ctx, "main", object, f, nil)
	f.Close()
	if err != nil {
		b.Fatalf("put %s: %v", object, err)
	}
	c, err := st.Commit(ctx, "main", "iteration "+strconv.Itoa(pass), &artifacts.CommitOptions{AllowEmpty: true})
	if err != nil {
		b.Fatalf("commit %s: %v", object, err)
	}
	p.put = time.Since(begin)
	p.fileBytes = info.Size

	begin = time.Now()
	train := filepath.Join(dir, "train.parquet")
	rc, _, err := st.GetObject(ctx, c.ID, object)
	if err != nil {
		b.Fatalf("get %s:%s: %v", c.ID, object, err)
	}
	out, err := os.Create(train)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, rc); err != nil {
		b.Fatalf("read %s:%s: %v", c.ID, object, err)
	}
	rc.Close()
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
	p.get = time.Since(begin)
	p.storePeak = hp.Stop() - hp.Base()

	hp = start()
	begin = time.Now()
	back, err := tables.ReadFile(train, tables.Trajectories)
	if err != nil {
		b.Fatalf("read %s: %v", train, err)
	}
	p.read = time.Since(begin)
	p.readPeak = hp.Stop() - hp.Base()
	checkRows(b, back, rows)
	return p
}

// streamPeak is the peak heap, above the heap before, of reading the
// file at path row by row without keeping the rows: the table path's
// own memory, where tables.ReadFile adds the rows it returns.
func streamPeak(b *testing.B, path string) uint64 {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	hp := heappeak.StartCollecting(20 * time.Millisecond)
	rd, err := tables.NewReader(f, fi.Size(), path, tables.Trajectories, nil)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for row, err := range rd.Rows(context.Background()) {
		if err != nil {
			b.Fatal(err)
		}
		n += len(row.TokenIDs)
	}
	if n != iterRows*iterTokens {
		b.Fatalf("streamed %d tokens, want %d", n, iterRows*iterTokens)
	}
	return hp.Stop() - hp.Base()
}

// checkRows fails the benchmark unless got are want's rows, spot-checked:
// the count, and the token ids and logprobs of rows spread over the file.
func checkRows(b *testing.B, got, want []tables.Trajectory) {
	b.Helper()
	if len(got) != len(want) {
		b.Fatalf("the trainer read %d rows, %d were written", len(got), len(want))
	}
	for i := 0; i < len(want); i += 997 {
		g, w := got[i], want[i]
		if g.PromptID != w.PromptID || len(g.TokenIDs) != len(w.TokenIDs) || g.TokenIDs[iterTokens-1] != w.TokenIDs[iterTokens-1] || g.Logprobs[7] != w.Logprobs[7] {
			b.Fatalf("row %d read back differs from the row written", i)
		}
	}
}

// floor is what testdata/floor.py prints.
type floor struct {
	Write float64 `json:"write_s"`
	Read  float64 `json:"read_s"`
	Rows  int     `json:"rows"`
	Bytes int64   `json:"bytes"`
}

func (f floor) total() time.Duration { return time.Duration((f.Write + f.Read) * float64(time.Second)) }

// pyarrowPass writes and reads src's table with pyarrow (testdata/floor.py).
func pyarrowPass(b *testing.B, py, src, dir string) floor {
	b.Helper()
	out := pyvenv.Run(b, "testdata/floor.py", nil, py, "testdata/floor.py", src, filepath.Join(dir, "pyarrow.parquet"))
	var f floor
	if err := json.Unmarshal(out, &f); err != nil {
		b.Fatalf("decode what testdata/floor.py printed (%q): %v", out, err)
	}
	if f.Rows != iterRows {
		b.Fatalf("testdata/floor.py read %d rows, want %d", f.Rows, iterRows)
	}
	return f
}

// BenchmarkProductionIteration times a production-size iteration's
// trajectories through rlpipe's path (see the package doc) on the
// embedded store and on lakeFS, against pyarrow writing and reading the
// same table on the same disk; passes alternate which goes first. It
// reports rlpipe/pyarrow_<store> (target ≤ 1.5), each phase's seconds and, from
// one more pass that is not timed, the peak heap of each phase above the
// heap before it: the writer's, the store's (put, commit and get), a read
// row by row (streaming: each well under the table), and the trainer's
// read, which holds every row it returns.
func BenchmarkProductionIteration(b *testing.B) {
	py := pyvenv.Python(b, "time pyarrow's Parquet writer and reader, the floor of a production-size iteration")
	rows := iteration()
	stores := []struct {
		name string
		open func(testing.TB) artifacts.Store
	}{
		{"embedded", func(tb testing.TB) artifacts.Store { return artifactstest.NewLocal(tb) }},
		{"lakefs", func(tb testing.TB) artifacts.Store {
			st, _, _ := artifactstest.ServeLakeFS(tb, artifactstest.NewLocal(tb), nil)
			return st
		}},
	}
	for _, s := range stores {
		b.Run(s.name, func(b *testing.B) {
			st := s.open(b)
			dir := b.TempDir()
			var rl phases
			var rlTotal, pyTotal time.Duration
			var py1 floor
			for i := 0; i < b.N; i++ {
				var p phases
				var f floor
				if i%2 == 0 {
					p = rlpipePass(b, st, rows, dir, i, heappeak.Start)
					f = pyarrowPass(b, py, filepath.Join(dir, "generate.parquet"), dir)
				} else {
					// The floor reads rlpipe's file of the previous pass.
					f = pyarrowPass(b, py, filepath.Join(dir, "generate.parquet"), dir)
					p = rlpipePass(b, st, rows, dir, i, heappeak.Start)
				}
				rlTotal += p.total()
				pyTotal += f.total()
				rl.write += p.write
				rl.put += p.put
				rl.get += p.get
				rl.read += p.read
				rl.fileBytes, py1 = p.fileBytes, f
			}
			// Memory: one more pass, untimed, sampled by collecting.
			b.StopTimer()
			mem := rlpipePass(b, st, rows, dir, b.N, func() *heappeak.Sampler { return heappeak.StartCollecting(20 * time.Millisecond) })
			mem.streamPeak = streamPeak(b, filepath.Join(dir, "train.parquet"))
			n := float64(b.N)
			sec := func(d time.Duration) float64 { return d.Seconds() / n }
			mb := func(v uint64) float64 { return float64(v) / (1 << 20) }
			// The store in the name: bench/verdict reads figures by
			// benchmark and name, not by sub-benchmark.
			b.ReportMetric(float64(rlTotal)/float64(pyTotal), "rlpipe/pyarrow_"+s.name)
			b.ReportMetric(sec(rlTotal), "rlpipe_s")
			b.ReportMetric(sec(pyTotal), "pyarrow_s")
			b.ReportMetric(sec(rl.write), "write_s")
			b.ReportMetric(sec(rl.put), "put_commit_s")
			b.ReportMetric(sec(rl.get), "get_s")
			b.ReportMetric(sec(rl.read), "read_s")
			b.ReportMetric(py1.Write, "pyarrow_write_s")
			b.ReportMetric(py1.Read, "pyarrow_read_s")
			b.ReportMetric(rawMB, "raw_MB")
			b.ReportMetric(float64(rl.fileBytes)/(1<<20), "file_MB")
			b.ReportMetric(float64(py1.Bytes)/(1<<20), "pyarrow_file_MB")
			b.ReportMetric(mb(mem.writePeak), "write_peak_MB")
			b.ReportMetric(mb(mem.storePeak), "store_peak_MB")
			b.ReportMetric(mb(mem.streamPeak), "stream_read_peak_MB")
			b.ReportMetric(mb(mem.readPeak), "trainer_read_peak_MB")
		})
	}
}

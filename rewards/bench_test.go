package rewards

import (
	"bufio"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/internal/benchtext"
)

// benchSpec is the reward the rescoring comparison computes: answer
// extraction, a numeric compare against the prompt's answer, a format
// check and a length penalty.
const benchSpec = `
components:
  - name: correct
    expr: 'num_equal(extract_answer(completion), answer, 1e-6) ? 1.0 : 0.0'
    weight: 1.0
  - name: format
    expr: 'completion.contains("####") ? 1.0 : 0.0'
    weight: 0.2
  - name: length
    expr: 'num_tokens > 150 ? -0.001 * double(num_tokens - 150) : 0.0'
    weight: 1.0
`

// synth makes deterministic synthetic trajectories: ~600-character
// completions of words from a small vocabulary with numbers among them
// (benchtext), ending in "#### n", "\boxed{n}" or nothing; eight samples
// per prompt; one in a hundred timed out.
type synth struct {
	words *benchtext.Words
}

func newSynth() *synth { return &synth{words: benchtext.New(rand.New(rand.NewPCG(1, 2)))} }

func promptAnswer(p int) string { return strconv.Itoa(p*7%1000 + 1) }

func (s *synth) completion(r *rand.Rand, p int) string {
	text := s.words.Text(r, 580)
	ans := promptAnswer(p)
	if r.IntN(3) == 0 {
		ans = strconv.Itoa(r.IntN(1000))
	}
	switch r.IntN(4) {
	case 0, 1:
		return text + "\n#### " + ans
	case 2:
		return text + ` so the answer is \boxed{` + ans + `}.`
	default:
		return text + " giving " + ans
	}
}

func (s *synth) fill(rows []tables.Trajectory, first int) {
	for k := range rows {
		i := first + k
		r := rand.New(rand.NewPCG(uint64(i), 7))
		p := i / 8
		pid := "p" + strconv.Itoa(p)
		rows[k] = tables.Trajectory{
			PromptID:      pid,
			SampleIndex:   int32(i % 8),
			GroupID:       "it0/" + pid,
			Completion:    s.completion(r, p),
			Turns:         []tables.Turn{{Role: "user", Content: "Solve problem " + strconv.Itoa(p)}},
			FinishReason:  "stop",
			NumTokens:     int32(140 + r.IntN(20)),
			PolicyVersion: "qwen2.5-0.5b+sha256:4f2a",
			Sampler:       `{"temperature":1,"top_p":1,"max_tokens":1024}`,
			Seed:          int64(i),
			Status:        tables.StatusOK,
		}
		if i%100 == 99 {
			msg := "deadline exceeded"
			rows[k].Status, rows[k].Error = tables.StatusTimeout, &msg
		}
	}
}

// writeSynth writes n synthetic trajectories to path and returns the
// prompts they answer.
func writeSynth(tb testing.TB, path string, n int) []tables.Prompt {
	tb.Helper()
	return writeSynthWith(tb, path, n, nil)
}

// writeSynthWith is writeSynth with write options (row group size).
func writeSynthWith(tb testing.TB, path string, n int, opts *tables.WriteOptions) []tables.Prompt {
	tb.Helper()
	writeBuffered(tb, path, func(bw io.Writer) error {
		w, err := tables.NewWriter(bw, tables.Trajectories, opts)
		if err != nil {
			return err
		}
		s := newSynth()
		rows := make([]tables.Trajectory, 4096)
		for first := 0; first < n; first += len(rows) {
			m := min(len(rows), n-first)
			s.fill(rows[:m], first)
			if err := w.Write(rows[:m]...); err != nil {
				return err
			}
		}
		return w.Close()
	})
	var prompts []tables.Prompt
	for p := 0; p < (n+7)/8; p++ {
		prompts = append(prompts, tables.Prompt{PromptID: "p" + strconv.Itoa(p), Prompt: "Solve problem " + strconv.Itoa(p), Answer: promptAnswer(p)})
	}
	return prompts
}

// BenchmarkScore1M rescores one million synthetic trajectories end to
// end: read the Parquet file, compute the reward, write the rewards
// Parquet file. Writing the input is not timed. Run it with -benchtime 1x.
func BenchmarkScore1M(b *testing.B) {
	const total = 1_000_000
	b.ReportAllocs()
	dir := b.TempDir()
	in := filepath.Join(dir, "trajectories.parquet")
	prompts, err := NewPrompts(writeSynth(b, in, total))
	if err != nil {
		b.Fatal(err)
	}
	prog := mustCompile(b, benchSpec)
	ctx := context.Background()
	timeScoring(b, total, func() Summary {
		return scoreFile(b, ctx, prog, in, filepath.Join(dir, "rewards.parquet"), &ScoreOptions{Prompts: prompts})
	})
}

// timeScoring runs score b.N times, checks that each scored total rows
// with 1% skipped and no error, and reports the rows scored per second of
// wall time and per second of CPU time: the machine may be shared, and
// rows per CPU-second does not depend on what else runs.
func timeScoring(b *testing.B, total int64, score func() Summary) {
	var elapsed, cpu time.Duration
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		start, cpu0 := time.Now(), cpuTime()
		sum := score()
		elapsed += time.Since(start)
		cpu += cpuTime() - cpu0
		if sum.Rows != total || sum.Skipped != total/100 || sum.Errors != 0 {
			b.Fatalf("summary %+v", sum)
		}
	}
	b.ReportMetric(float64(total)*float64(b.N)/elapsed.Seconds(), "rows/s")
	b.ReportMetric(float64(total)*float64(b.N)/cpu.Seconds(), "rows/cpu_s")
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scoreFile scores the file at in into a new file at out.
func scoreFile(tb testing.TB, ctx context.Context, p *Program, in, out string, o *ScoreOptions) Summary {
	tb.Helper()
	rf, size := openSized(tb, in)
	defer rf.Close()
	var sum Summary
	writeBuffered(tb, out, func(bw io.Writer) (err error) {
		sum, err = p.ScoreFile(ctx, bw, rf, size, o)
		return err
	})
	return sum
}

// openSized opens the file at path, which the caller closes, and returns
// its size.
func openSized(tb testing.TB, path string) (*os.File, int64) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		tb.Fatal(err)
	}
	return f, st.Size()
}

// writeBuffered creates the file at path and writes it with write
// through a 1 MiB buffer.
func writeBuffered(tb testing.TB, path string, write func(w io.Writer) error) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		tb.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// writePrompts writes prompts as a prompts table at path.
func writePrompts(tb testing.TB, path string, prompts []tables.Prompt) {
	tb.Helper()
	writeBuffered(tb, path, func(w io.Writer) error { return tables.Write(w, tables.Prompts, prompts, nil) })
}

// BenchmarkRescore1M is what bench/rescore times for rlpipe, on this
// package's synthetic rows: load the prompts table with the program's
// ReadPromptsAsync
// while ScoreFile scores with the comparison's reward. Run it with
// -benchtime 3x.
func BenchmarkRescore1M(b *testing.B) {
	const total = 1_000_000
	b.ReportAllocs()
	dir := b.TempDir()
	in := filepath.Join(dir, "trajectories.parquet")
	pp := filepath.Join(dir, "prompts.parquet")
	writePrompts(b, pp, writeSynth(b, in, total))
	prog := mustCompile(b, rescoreSpec)
	ctx := context.Background()
	timeScoring(b, total, func() Summary {
		f, size := openSized(b, pp)
		defer f.Close()
		prompts := prog.ReadPromptsAsync(ctx, f, size, "prompts")
		return scoreFile(b, ctx, prog, in, filepath.Join(dir, "rewards.parquet"), &ScoreOptions{Prompts: prompts})
	})
}

// readPromptsFile reads the prompts file at path: every column, or with
// prog the columns it reads.
func readPromptsFile(tb testing.TB, ctx context.Context, path string, prog *Program) *Prompts {
	tb.Helper()
	f, size := openSized(tb, path)
	defer f.Close()
	read := ReadPrompts
	if prog != nil {
		read = prog.ReadPrompts
	}
	p, err := read(ctx, f, size, "prompts")
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// BenchmarkReadPrompts reads and indexes a prompts table of 125,000
// prompts (the rescoring comparison's): every column, and the two a
// spec reading answer needs.
func BenchmarkReadPrompts(b *testing.B) {
	b.ReportAllocs()
	var prompts []tables.Prompt
	for p := 0; p < 125_000; p++ {
		prompts = append(prompts, tables.Prompt{PromptID: "gsm8k-train-" + strconv.Itoa(1_000_000 + p)[1:],
			Prompt: "Problem " + strconv.Itoa(p) + ": how many are left?", Answer: promptAnswer(p), Source: "generated", Split: "train"})
	}
	pp := filepath.Join(b.TempDir(), "prompts.parquet")
	writePrompts(b, pp, prompts)
	ctx := context.Background()
	prog := mustCompile(b, rescoreSpec)
	for _, c := range []struct {
		name string
		prog *Program
	}{{"all", nil}, {"answer", prog}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if p := readPromptsFile(b, ctx, pp, c.prog); p.Len() != len(prompts) {
					b.Fatalf("%d prompts", p.Len())
				}
			}
		})
	}
}

// BenchmarkScoreBatch scores one decoded batch of 4,096 rows again and
// again: evaluation and the output columns, no Parquet.
func BenchmarkScoreBatch(b *testing.B) {
	b.ReportAllocs()
	dir := b.TempDir()
	in := filepath.Join(dir, "trajectories.parquet")
	prompts, err := NewPrompts(writeSynth(b, in, 4096))
	if err != nil {
		b.Fatal(err)
	}
	f, size := openSized(b, in)
	defer f.Close()
	rd, err := tables.NewReader(f, size, "in", tables.Trajectories, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var rec arrow.RecordBatch
	for r, err := range rd.Records(ctx) {
		if err != nil {
			b.Fatal(err)
		}
		r.Retain()
		rec = r
		break
	}
	defer rec.Release()
	prog := mustCompile(b, rescoreSpec)
	o := (&ScoreOptions{Prompts: prompts}).withDefaults()
	s := newScorer(prog, &o, readAlloc)
	defer s.release()
	n := int(rec.NumRows())
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		var sum Summary
		out, err := s.batch(ctx, rec, n, 0, &sum)
		if err != nil {
			b.Fatal(err)
		}
		out.Release()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

package rewards

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// trajectories writes rows as a trajectories file with small row groups,
// so that scoring runs in parallel.
func trajectories(t *testing.T, rows []tables.Trajectory) []byte {
	return trajectoriesRG(t, rows, 64)
}

func trajectoriesRG(t *testing.T, rows []tables.Trajectory, rowGroup int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := tables.Write(&buf, tables.Trajectories, rows, &tables.WriteOptions{RowGroupRows: rowGroup, BatchRows: 32}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// promptsRG is prompts as a prompts table in row groups of rowGroup.
func promptsRG(t *testing.T, prompts []tables.Prompt, rowGroup int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := tables.Write(&buf, tables.Prompts, prompts, &tables.WriteOptions{RowGroupRows: rowGroup}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testRows makes n trajectories over n/4 prompts: correct, wrong, boxed
// and timed-out samples.
func testRows(n int) ([]tables.Trajectory, []tables.Prompt) {
	var rows []tables.Trajectory
	var prompts []tables.Prompt
	for i := 0; i < n; i++ {
		p := i / 4
		pid := "p" + strconv.Itoa(p)
		if i%4 == 0 {
			prompts = append(prompts, tables.Prompt{PromptID: pid, Prompt: "what is " + strconv.Itoa(p) + "+1?",
				Answer: strconv.Itoa(p + 1), Metadata: fmt.Sprintf(`{"level": %d}`, p%3)})
		}
		tr := tables.Trajectory{PromptID: pid, SampleIndex: int32(i % 4), GroupID: pid, FinishReason: "stop",
			NumTokens: int32(100 + i), Status: tables.StatusOK,
			Turns: []tables.Turn{{Role: "user", Content: "q"}, {Role: "assistant", Content: "a"}}}
		switch i % 4 {
		case 0:
			tr.Completion = "it is " + strconv.Itoa(p+1) + "\n#### " + strconv.Itoa(p+1)
		case 1:
			tr.Completion = "it is " + strconv.Itoa(p+2)
		case 2:
			tr.Completion = `so \boxed{` + strconv.Itoa(p+1) + `}`
		case 3:
			msg := "sampler timed out"
			tr.Status, tr.Error = tables.StatusTimeout, &msg
		}
		rows = append(rows, tr)
	}
	return rows, prompts
}

func mustCompile(t testing.TB, src string, opts ...Option) *Program {
	t.Helper()
	s, err := ParseSpec("spec.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// score runs ScoreFile over rows and reads the rewards back.
func score(t *testing.T, p *Program, rows []tables.Trajectory, o *ScoreOptions) ([]tables.Reward, Summary) {
	t.Helper()
	in := trajectories(t, rows)
	var out bytes.Buffer
	sum, err := p.ScoreFile(context.Background(), &out, bytes.NewReader(in), int64(len(in)), o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tables.Read(bytes.NewReader(out.Bytes()), int64(out.Len()), "rewards", tables.Rewards)
	if err != nil {
		t.Fatal(err)
	}
	return got, sum
}

const gsm8k = `
components:
  - name: correct
    expr: 'num_equal(extract_answer(completion), answer, 1e-6) ? 1.0 : 0.0'
  - name: format
    expr: 'completion.contains("####")'
    weight: 0.5
`

func TestScoreFile(t *testing.T) {
	rows, prompts := testRows(400)
	idx, err := NewPrompts(prompts)
	if err != nil {
		t.Fatal(err)
	}
	p := mustCompile(t, gsm8k)
	got, sum := score(t, p, rows, &ScoreOptions{Prompts: idx, Concurrency: 3})
	if len(got) != len(rows) {
		t.Fatalf("%d rewards for %d trajectories", len(got), len(rows))
	}
	for i, r := range got {
		tr := rows[i]
		if r.PromptID != tr.PromptID || r.SampleIndex != tr.SampleIndex {
			t.Fatalf("row %d is %s/%d, want %s/%d: out of order", i, r.PromptID, r.SampleIndex, tr.PromptID, tr.SampleIndex)
		}
		if r.SpecDigest != p.Digest() {
			t.Fatalf("row %d digest %q", i, r.SpecDigest)
		}
		var want tables.Reward
		switch i % 4 {
		case 0:
			want = tables.Reward{Components: map[string]float64{"correct": 1, "format": 1}, Total: 1.5, Status: "ok"}
		case 1:
			want = tables.Reward{Components: map[string]float64{"correct": 0, "format": 0}, Total: 0, Status: "ok"}
		case 2:
			want = tables.Reward{Components: map[string]float64{"correct": 1, "format": 0}, Total: 1, Status: "ok"}
		case 3:
			if r.Status != "skipped: timeout" || r.Error == nil || *r.Error != "sampler timed out" || len(r.Components) != 0 || !math.IsNaN(r.Total) {
				t.Fatalf("row %d: skipped row is %+v", i, r)
			}
			continue
		}
		if r.Status != want.Status || r.Total != want.Total || fmt.Sprint(r.Components) != fmt.Sprint(want.Components) || r.Error != nil {
			t.Fatalf("row %d: %+v, want %+v", i, r, want)
		}
		// The row-level API agrees with the columnar one.
		pr, _ := idx.Lookup(tr.PromptID)
		one, err := p.Score(context.Background(), Row{Trajectory: tr, Prompt: pr, HasPrompt: true}, nil)
		if err != nil || one.Total != r.Total || fmt.Sprint(one.Components) != fmt.Sprint(r.Components) || one.Status != r.Status {
			t.Fatalf("row %d: Score gives %+v, %v; ScoreFile %+v", i, one, err, r)
		}
	}
	if sum.Rows != 400 || sum.Scored != 300 || sum.Skipped != 100 || sum.Errors != 0 || sum.SkippedBy["timeout"] != 100 {
		t.Errorf("summary %+v", sum)
	}
	if c := sum.Components["correct"]; c.Count != 300 || c.Sum != 200 || c.Min != 0 || c.Max != 1 || math.Abs(c.Mean()-2.0/3) > 1e-12 {
		t.Errorf("correct stats %+v", c)
	}
	if sum.Total.Sum != 100*1.5+100*1 {
		t.Errorf("total stats %+v", sum.Total)
	}
}

// TestPerRowErrorPolicy: an expression that fails on some rows marks those
// rows "error" (or "nonfinite" for a value that is not a number) with
// null components and says which component failed and why; the other
// rows are scored and the file is complete.
func TestPerRowErrorPolicy(t *testing.T) {
	rows, prompts := testRows(64)
	rows[5].PromptID = "nowhere"
	idx, _ := NewPrompts(prompts)
	p := mustCompile(t, `
components:
  - name: parsed
    expr: 'parse_number(extract_answer(completion)) > 0.0'
  - name: hard
    expr: 'metadata.level == 2 ? 1.0 : 0.0'
  - name: ratio
    expr: '1.0 / double(sample_index)'
`)
	got, sum := score(t, p, rows, &ScoreOptions{Prompts: idx})
	if len(got) != len(rows) {
		t.Fatalf("%d rows", len(got))
	}
	for i, r := range got {
		switch {
		case i%4 == 3:
			if r.Status != "skipped: timeout" {
				t.Errorf("row %d: %+v", i, r)
			}
		case i == 5:
			if r.Status != StatusError || r.Error == nil || *r.Error != `component hard: prompt "nowhere" is not in the prompts table` {
				t.Errorf("row 5: %+v", r)
			}
		case i%4 == 0:
			// 1/0 is +Inf: a reward must be finite.
			if r.Status != StatusNonfinite || r.Error == nil || *r.Error != "component ratio: the value is +Inf" || len(r.Components) != 0 || !math.IsNaN(r.Total) {
				t.Errorf("row %d: %+v", i, r)
			}
		default:
			if r.Status != StatusOK || len(r.Components) != 3 {
				t.Errorf("row %d: %+v %v", i, r, deref(r.Error))
			}
		}
	}
	if sum.Errors != 1 || sum.Nonfinite != 16 || sum.Scored != 31 || len(sum.FirstErrors) != MaxFirstErrors {
		t.Errorf("summary: %d errors, %d nonfinite, %d scored, %d first errors", sum.Errors, sum.Nonfinite, sum.Scored, len(sum.FirstErrors))
	}
	if e := sum.FirstErrors[0]; e.Row != 0 || e.PromptID != "p0" || e.Status != StatusNonfinite || !strings.Contains(e.String(), "row 0 (prompt p0, sample 0): component ratio") {
		t.Errorf("first error %+v", e)
	}
	if e := sum.FirstErrors[2]; e.Row != 5 || e.Status != StatusError {
		t.Errorf("third error %+v, want row 5's", e)
	}
	if e := sum.FirstNonfinite; e == nil || e.Row != 0 || e.Message != "component ratio: the value is +Inf" {
		t.Errorf("first nonfinite %+v", e)
	}
	// 31 rows are scored: the batch has something to train on.
	if err := sum.CheckFinite(); err != nil {
		t.Errorf("CheckFinite: %v", err)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestScoreErrors(t *testing.T) {
	rows, _ := testRows(8)
	p := mustCompile(t, gsm8k)
	in := trajectories(t, rows)
	t.Run("no prompts", func(t *testing.T) {
		_, err := p.ScoreFile(context.Background(), &bytes.Buffer{}, bytes.NewReader(in), int64(len(in)), nil)
		if !errors.Is(err, ErrNoPrompts) {
			t.Fatalf("error %v, want ErrNoPrompts", err)
		}
	})
	t.Run("not trajectories", func(t *testing.T) {
		var buf bytes.Buffer
		if err := tables.Write(&buf, tables.Prompts, []tables.Prompt{{PromptID: "a"}}, nil); err != nil {
			t.Fatal(err)
		}
		idx, _ := NewPrompts(nil)
		_, err := p.ScoreFile(context.Background(), &bytes.Buffer{}, bytes.NewReader(buf.Bytes()), int64(buf.Len()), &ScoreOptions{Prompts: idx, Name: "x.parquet"})
		if !errors.Is(err, tables.ErrSchemaMismatch) || !strings.Contains(err.Error(), "x.parquet") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("not parquet", func(t *testing.T) {
		idx, _ := NewPrompts(nil)
		_, err := p.ScoreFile(context.Background(), &bytes.Buffer{}, strings.NewReader("hello"), 5, &ScoreOptions{Prompts: idx})
		if !errors.Is(err, tables.ErrNotParquet) {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		idx, _ := NewPrompts(nil)
		_, err := p.ScoreFile(ctx, &bytes.Buffer{}, bytes.NewReader(in), int64(len(in)), &ScoreOptions{Prompts: idx})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("failed write", func(t *testing.T) {
		many, prompts := testRows(20_000)
		idx, _ := NewPrompts(prompts)
		in := trajectoriesRG(t, many, 1_000)
		o := &ScoreOptions{Prompts: idx, Write: &tables.WriteOptions{RowGroupRows: 2_000}}
		var full bytes.Buffer
		if _, err := p.ScoreFile(context.Background(), &full, bytes.NewReader(in), int64(len(in)), o); err != nil {
			t.Fatal(err)
		}
		for _, after := range []int{0, full.Len() / 3, full.Len() - 10} {
			_, err := p.ScoreFile(context.Background(), &failAfter{n: after}, bytes.NewReader(in), int64(len(in)), o)
			if !errors.Is(err, errDiskFull) {
				t.Errorf("failing after %d of %d bytes: error %v, want the write's", after, full.Len(), err)
			}
		}
	})
	t.Run("corrupt row group", func(t *testing.T) {
		many, prompts := testRows(20_000)
		idx, _ := NewPrompts(prompts)
		in := trajectoriesRG(t, many, 1_000)
		// Zero the middle of the file: pages of the row groups there.
		bad := bytes.Clone(in)
		clear(bad[len(bad)/2 : len(bad)/2+4096])
		_, err := p.ScoreFile(context.Background(), &bytes.Buffer{}, bytes.NewReader(bad), int64(len(bad)), &ScoreOptions{Prompts: idx})
		if err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("duplicate prompts", func(t *testing.T) {
		if _, err := NewPrompts([]tables.Prompt{{PromptID: "a"}, {PromptID: "a"}}); err == nil {
			t.Fatal("no error")
		}
	})
}

var errDiskFull = errors.New("disk full")

// failAfter is a destination that takes n bytes, then fails.
type failAfter struct{ n int }

func (f *failAfter) Write(b []byte) (int, error) {
	if len(b) > f.n {
		return 0, errDiskFull
	}
	f.n -= len(b)
	return len(b), nil
}

func TestScoreLimit(t *testing.T) {
	rows, prompts := testRows(200)
	idx, _ := NewPrompts(prompts)
	got, sum := score(t, mustCompile(t, gsm8k), rows, &ScoreOptions{Prompts: idx, Limit: 70})
	if len(got) != 70 || sum.Rows != 70 || got[69].PromptID != rows[69].PromptID {
		t.Fatalf("%d rows, summary %+v", len(got), sum)
	}
}

func TestTotalAndStatuses(t *testing.T) {
	rows, prompts := testRows(16)
	rows[1].Status = tables.StatusTruncated
	idx, _ := NewPrompts(prompts)
	p := mustCompile(t, `
statuses: [ok, truncated]
components:
  - name: correct
    expr: 'num_equal(extract_answer(completion), answer) ? 1.0 : 0.0'
  - name: format
    expr: 'completion.contains("####") ? 1.0 : 0.0'
  - name: cut
    expr: 'status == "truncated" ? 1.0 : 0.0'
total: 'correct * (1.0 + format) - 0.5 * cut'
`)
	got, _ := score(t, p, rows, &ScoreOptions{Prompts: idx})
	if got[0].Total != 2 || got[2].Total != 1 || got[1].Total != -0.5 || got[1].Status != "ok" {
		t.Fatalf("totals %v %v %v", got[0], got[1], got[2])
	}
}

func TestVerifiersAndJudges(t *testing.T) {
	rows, prompts := testRows(40)
	idx, _ := NewPrompts(prompts)
	verify := func(ctx context.Context, r Row, _ Memoizer) (VerifierResult, error) {
		if r.Trajectory.SampleIndex == 2 && r.Trajectory.PromptID == "p3" {
			return VerifierResult{}, errors.New("sandbox crashed")
		}
		ok := NumEqual(ExtractAnswer(r.Trajectory.Completion), r.Prompt.Answer, 0)
		return VerifierResult{Passed: ok, Status: "ok", Stdout: r.Trajectory.Completion[:2]}, nil
	}
	judge := func(ctx context.Context, r Row, _ Memoizer) (JudgeResult, error) {
		if r.Trajectory.SampleIndex == 1 && r.Trajectory.PromptID == "p4" {
			// As rewards/judge words its errors: naming the judge itself.
			return JudgeResult{}, errors.New("judge API unavailable: judge style: POST http://127.0.0.1:9/v1/chat/completions: gave up after 3 attempt(s)")
		}
		return JudgeResult{Score: float64(len(r.Trajectory.Turns)) / 4, Status: "ok", Reason: "turns"}, nil
	}
	p := mustCompile(t, `
verifiers:
  - name: math
    image: python:3.12
judges:
  - name: style
    model: small
components:
  - name: verified
    expr: 'verifiers.math.passed ? 1.0 : 0.0'
  - name: style
    expr: 'judges["style"].score'
`, WithVerifier("math", verify), WithJudge("style", judge))
	if p.Spec().Verifiers[0].Config["image"] != "python:3.12" {
		t.Errorf("config %v", p.Spec().Verifiers[0].Config)
	}
	got, sum := score(t, p, rows, &ScoreOptions{Prompts: idx, RunnerConcurrency: 4})
	for i, r := range got {
		switch {
		case i%4 == 3:
			if r.Status != "skipped: timeout" || r.VerifierOutputs != "" {
				t.Errorf("row %d: %+v", i, r)
			}
		case i == 14:
			if r.Status != StatusError || deref(r.Error) != "verifier math: sandbox crashed" {
				t.Errorf("row 14: %+v %s", r, deref(r.Error))
			}
		case i == 17:
			if r.Status != StatusError || deref(r.Error) != "judge API unavailable: judge style: POST http://127.0.0.1:9/v1/chat/completions: gave up after 3 attempt(s)" {
				t.Errorf("row 17: %+v %s (the judge named once)", r, deref(r.Error))
			}
		default:
			var vo map[string]VerifierResult
			var jo map[string]JudgeResult
			if err := json.Unmarshal([]byte(r.VerifierOutputs), &vo); err != nil {
				t.Fatalf("row %d verifier outputs %q: %v", i, r.VerifierOutputs, err)
			}
			if err := json.Unmarshal([]byte(r.JudgeOutputs), &jo); err != nil {
				t.Fatalf("row %d judge outputs %q: %v", i, r.JudgeOutputs, err)
			}
			want := 0.0
			if vo["math"].Passed {
				want = 1
			}
			if r.Status != StatusOK || r.Components["verified"] != want || r.Components["style"] != 0.5 || jo["style"].Reason != "turns" {
				t.Errorf("row %d: %+v", i, r)
			}
		}
	}
	if sum.Errors != 2 || sum.Components["verified"].Sum != 19 {
		t.Errorf("summary %+v", sum)
	}
}

// TestActivationAllocations: scoring allocates a bounded number of
// objects per row, however many variables the expressions read.
func TestActivationAllocations(t *testing.T) {
	p := mustCompile(t, `
components:
  - name: a
    expr: 'completion.contains("####") && num_tokens > 0 && finish_reason == "stop" && prompt_id != "" ? 1.0 : 0.0'
  - name: b
    expr: 'completion.contains("it") && num_tokens < 1000 ? 1.0 : 0.0'
`)
	measure := func(n int) float64 {
		rows, _ := testRows(n)
		in := trajectoriesRG(t, rows, 1<<16)
		var out bytes.Buffer
		return testing.AllocsPerRun(3, func() {
			out.Reset()
			if _, err := p.ScoreFile(context.Background(), &out, bytes.NewReader(in), int64(len(in)), &ScoreOptions{Concurrency: 1}); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := measure(512), measure(4096)
	// Per scored row: the completion, prompt_id and finish_reason boxed
	// once each however often they are read; the rest is per file, row
	// group or page.
	if perRow := (large - small) / (4096 - 512); perRow > 8 {
		t.Errorf("%.1f allocations per row", perRow)
	}
}

// TestReadPrompts: a prompts file of several row groups (read in
// parallel) indexes the same rows as NewPrompts, and a duplicate id in a
// later row group is reported as NewPrompts reports it.
func TestReadPrompts(t *testing.T) {
	_, prompts := testRows(4_000)
	prompts[7].Messages = []tables.Message{{Role: "user", Content: "hi"}}
	prompts[500].Metadata = `{"level": 9}`
	write := func(ps []tables.Prompt) []byte { return promptsRG(t, ps, 128) }
	for _, procs := range []int{1, 3} {
		t.Run(fmt.Sprint("procs ", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			b := write(prompts)
			got, err := ReadPrompts(context.Background(), bytes.NewReader(b), int64(len(b)), "prompts")
			if err != nil {
				t.Fatal(err)
			}
			if got.Len() != len(prompts) {
				t.Fatalf("%d prompts, want %d", got.Len(), len(prompts))
			}
			for _, want := range prompts {
				p, ok := got.Lookup(want.PromptID)
				if !ok || fmt.Sprintf("%#v", p) != fmt.Sprintf("%#v", want) {
					t.Fatalf("prompt %s: %#v, want %#v", want.PromptID, p, want)
				}
			}
			dup := append([]tables.Prompt(nil), prompts...)
			dup[700].PromptID = dup[300].PromptID
			dup[900].PromptID = dup[100].PromptID
			b = write(dup)
			_, err = ReadPrompts(context.Background(), bytes.NewReader(b), int64(len(b)), "prompts")
			_, want := NewPrompts(dup)
			if err == nil || want == nil || err.Error() != want.Error() {
				t.Fatalf("error %v, want %v", err, want)
			}
		})
	}
}

// TestReadPromptsAsync: prompts read in the background give the rewards
// file that prompts read first give, and a prompts file that cannot be
// read fails the scoring with its error.
func TestReadPromptsAsync(t *testing.T) {
	ctx := context.Background()
	rows, prompts := testRows(3_000)
	in := trajectoriesRG(t, rows, 500)
	pf := promptsRG(t, prompts, 700)
	p := mustCompile(t, gsm8k)
	scoreWith := func(idx *Prompts, limit int64) ([]byte, error) {
		var out bytes.Buffer
		_, err := p.ScoreFile(ctx, &out, bytes.NewReader(in), int64(len(in)), &ScoreOptions{Prompts: idx, Limit: limit})
		return out.Bytes(), err
	}
	idx, err := NewPrompts(prompts)
	if err != nil {
		t.Fatal(err)
	}
	want, err := scoreWith(idx, 0)
	if err != nil {
		t.Fatal(err)
	}
	async := ReadPromptsAsync(ctx, bytes.NewReader(pf), int64(len(pf)), "prompts")
	got, err := scoreWith(async, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("rewards file differs with prompts read in the background")
	}
	if err := async.Err(); err != nil || async.Len() != len(prompts) {
		t.Errorf("Err %v, Len %d: want nil, %d", err, async.Len(), len(prompts))
	}

	bad := pf[:len(pf)/2]
	for _, limit := range []int64{0, 1} {
		broken := ReadPromptsAsync(ctx, bytes.NewReader(bad), int64(len(bad)), "broken prompts")
		_, err = scoreWith(broken, limit)
		if err == nil || broken.Err() == nil || err.Error() != broken.Err().Error() {
			t.Errorf("limit %d: ScoreFile error %v, Err %v: want the reading error from both", limit, err, broken.Err())
		}
		if _, ok := broken.Lookup(prompts[0].PromptID); ok || broken.Len() != 0 {
			t.Errorf("limit %d: a prompts file that failed to read has prompts", limit)
		}
	}
}

// A judge that returns a score that is not a number (NaN, ±Inf) makes its
// row nonfinite, naming the judge and the value; judge_outputs is empty,
// as JSON cannot hold the score.
func TestJudgeScoreNotFinite(t *testing.T) {
	rows, prompts := testRows(4)
	idx, _ := NewPrompts(prompts)
	judge := func(ctx context.Context, r Row, _ Memoizer) (JudgeResult, error) {
		switch r.Trajectory.SampleIndex {
		case 1:
			return JudgeResult{Score: math.NaN(), Status: "ok"}, nil
		case 2:
			return JudgeResult{Score: math.Inf(1), Status: "out_of_range"}, nil
		}
		return JudgeResult{Score: 0.5, Status: "ok"}, nil
	}
	p := mustCompile(t, `
judges:
  - name: style
    model: small
components:
  - name: style
    expr: 'judges["style"].score'
`, WithJudge("style", judge))
	got, sum := score(t, p, rows, &ScoreOptions{Prompts: idx})
	want := []struct{ status, err string }{
		{StatusOK, "<nil>"},
		{StatusNonfinite, "judge style score: the value is NaN"},
		{StatusNonfinite, "judge style score: the value is +Inf"},
		{"skipped: timeout", "sampler timed out"},
	}
	for i, r := range got {
		if r.Status != want[i].status || deref(r.Error) != want[i].err || r.Status == StatusNonfinite && r.JudgeOutputs != "" {
			t.Errorf("row %d: status %s, error %q, judge outputs %q; want %s %q", i, r.Status, deref(r.Error), r.JudgeOutputs, want[i].status, want[i].err)
		}
	}
	if sum.Nonfinite != 2 || sum.Scored != 1 || sum.Errors != 0 {
		t.Errorf("summary %+v", sum)
	}
	// Score, for one row, says the same.
	r, err := p.Score(context.Background(), Row{Trajectory: rows[1], Prompt: prompts[0], HasPrompt: true}, nil)
	if err != nil || r.Status != StatusNonfinite || deref(r.Error) != "judge style score: the value is NaN" || !math.IsNaN(r.Total) {
		t.Errorf("Score = %+v (%s), %v", r, deref(r.Error), err)
	}
}

// A spec reads an episode's outcome in its environment (env_outcome, a
// JSON object) as outcome, in the columnar scorer and row by row alike; a
// single-turn sample's is {}, and an outcome that is not a JSON object
// is that row's error, naming it.
func TestOutcome(t *testing.T) {
	outcome := func(s string) *string { return &s }
	rows := []tables.Trajectory{
		{PromptID: "p0", SampleIndex: 0, Status: tables.StatusOK, EnvOutcome: outcome(`{"reward": 0.75, "info": {"verifier_verdict": "pass", "correct": 3}}`)},
		{PromptID: "p0", SampleIndex: 1, Status: tables.StatusOK, EnvOutcome: outcome(`{"reward": 0, "info": {"verifier_verdict": "fail: 2 != 3"}}`)},
		{PromptID: "p0", SampleIndex: 2, Status: tables.StatusOK, EnvOutcome: outcome(`{"reward": null, "info": null}`)},
		{PromptID: "p0", SampleIndex: 3, Status: tables.StatusOK}, // a single-turn sample
	}
	for i := range rows {
		rows[i].Turns = []tables.Turn{{Role: "user", Content: "q"}, {Role: "assistant", Content: "a"}}
	}
	p := mustCompile(t, `
components:
  - name: verified
    expr: 'has(outcome.info) && outcome.info != null && outcome.info.verifier_verdict == "pass" ? 1.0 : 0.0'
  - name: env
    expr: 'has(outcome.reward) && outcome.reward != null ? double(outcome.reward) : -1.0'
`)
	got, _ := score(t, p, rows, nil)
	want := []string{"map[env:0.75 verified:1]", "map[env:0 verified:0]", "map[env:-1 verified:0]", "map[env:-1 verified:0]"}
	for i, r := range got {
		if r.Status != tables.StatusOK || fmt.Sprint(r.Components) != want[i] {
			t.Errorf("row %d: %s %v (%s), want %s", i, r.Status, r.Components, deref(r.Error), want[i])
		}
		one, err := p.Score(context.Background(), Row{Trajectory: rows[i]}, nil)
		if err != nil || fmt.Sprint(one.Components) != want[i] {
			t.Errorf("row %d: Score gives %v, %v; want %s", i, one.Components, err, want[i])
		}
	}
	// Writers refuse such a table; a row handed to Score directly can hold one.
	bad := rows[0]
	bad.EnvOutcome = outcome(`[1, 2]`)
	r, err := p.Score(context.Background(), Row{Trajectory: bad}, nil)
	if err != nil || r.Status != "error" || !strings.Contains(deref(r.Error), `env_outcome of sample 0 of prompt "p0" is not a JSON object`) {
		t.Errorf("an outcome that is not an object: %s %s, %v", r.Status, deref(r.Error), err)
	}
}

// A program reads only the prompt columns its expressions use, scores
// with them as with the whole table, and prompts read for one program
// are refused by a program that needs a column they lack.
func TestProgramReadsItsPromptColumns(t *testing.T) {
	ctx := context.Background()
	rows, prompts := testRows(2_000)
	in := trajectoriesRG(t, rows, 300)
	pf := promptsRG(t, prompts, 200)
	src := bytes.NewReader(pf)
	p := mustCompile(t, gsm8k)
	if got := fmt.Sprint(p.PromptColumns()); got != "[prompt_id answer]" {
		t.Fatalf("PromptColumns = %s, want [prompt_id answer]", got)
	}
	scoreWith := func(p *Program, idx *Prompts) ([]byte, error) {
		var out bytes.Buffer
		_, err := p.ScoreFile(ctx, &out, bytes.NewReader(in), int64(len(in)), &ScoreOptions{Prompts: idx})
		return out.Bytes(), err
	}
	all, err := ReadPrompts(ctx, src, int64(len(pf)), "prompts")
	if err != nil {
		t.Fatal(err)
	}
	want, err := scoreWith(p, all)
	if err != nil {
		t.Fatal(err)
	}
	some, err := p.ReadPrompts(ctx, src, int64(len(pf)), "prompts")
	if err != nil {
		t.Fatal(err)
	}
	got, err := scoreWith(p, some)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("rewards file with the program's columns differs (err %v)", err)
	}
	if got, err := scoreWith(p, p.ReadPromptsAsync(ctx, src, int64(len(pf)), "prompts")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("rewards file with the program's columns read in the background differs (err %v)", err)
	}
	q, _ := some.Lookup(prompts[5].PromptID)
	if w := (tables.Prompt{PromptID: prompts[5].PromptID, Answer: prompts[5].Answer}); fmt.Sprintf("%#v", q) != fmt.Sprintf("%#v", w) {
		t.Errorf("prompt read with [prompt_id answer] = %#v, want %#v", q, w)
	}

	meta := mustCompile(t, `
components:
  - name: hard
    expr: 'metadata.level == 2 ? 1.0 : 0.0'
`)
	_, err = scoreWith(meta, some)
	if !errors.Is(err, ErrNoPrompts) || !strings.Contains(err.Error(), "read with columns [prompt_id answer], this spec needs [prompt_id metadata]") {
		t.Fatalf("scoring metadata with prompts read for answer: %v, want ErrNoPrompts naming both column lists", err)
	}
	if _, err := scoreWith(meta, all); err != nil {
		t.Fatalf("scoring metadata with every column: %v", err)
	}

	verify := func(ctx context.Context, r Row, _ Memoizer) (VerifierResult, error) {
		return VerifierResult{Passed: r.Prompt.Prompt != ""}, nil
	}
	runner := mustCompile(t, `
verifiers:
  - name: asked
components:
  - name: asked
    expr: 'verifiers.asked.passed ? 1.0 : 0.0'
`, WithVerifier("asked", verify))
	if runner.PromptColumns() != nil {
		t.Fatalf("a spec with a verifier reads prompt columns %v, want all (nil)", runner.PromptColumns())
	}
	if _, err := scoreWith(runner, some); !errors.Is(err, ErrNoPrompts) {
		t.Fatalf("a verifier's spec with prompts read for answer: %v, want ErrNoPrompts", err)
	}
}

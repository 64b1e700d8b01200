package tables

import (
	"bytes"
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func ptr[T any](v T) *T { return &v }

// writeRows writes rows of t to memory and fails the test on error.
func writeRows[T any](t *testing.T, tb *Table[T], rows []T, opts *WriteOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, tb, rows, opts); err != nil {
		t.Fatalf("write %s: %v", tb.Name(), err)
	}
	return buf.Bytes()
}

func readRows[T any](t *testing.T, tb *Table[T], data []byte) []T {
	t.Helper()
	rows, err := Read(bytes.NewReader(data), int64(len(data)), "test.parquet", tb)
	if err != nil {
		t.Fatalf("read %s: %v", tb.Name(), err)
	}
	return rows
}

func checkRoundTrip[T any](t *testing.T, tb *Table[T], rows []T) {
	t.Helper()
	data := writeRows(t, tb, rows, nil)
	got := readRows(t, tb, data)
	if len(got) != len(rows) {
		t.Fatalf("read %d rows, wrote %d", len(got), len(rows))
	}
	for i := range rows {
		if !reflect.DeepEqual(got[i], rows[i]) {
			t.Errorf("row %d:\n got  %#v\n want %#v", i, got[i], rows[i])
		}
	}
	// Same rows, same bytes: files are cached by digest.
	if again := writeRows(t, tb, rows, nil); !bytes.Equal(data, again) {
		t.Errorf("writing the same rows twice gave different bytes (%d vs %d)", len(data), len(again))
	}
}

func TestRoundTrip(t *testing.T) {
	t.Run("prompts", func(t *testing.T) {
		checkRoundTrip(t, Prompts, []Prompt{
			{PromptID: "p1", Prompt: "What is 2+2?", Answer: "4", Metadata: `{"level":1}`, Source: "gsm8k@v1", Split: "train"},
			{PromptID: "p2", Messages: []Message{{Role: "system", Content: "Réponds en français."}, {Role: "user", Content: "2+2 = ? 🤔"}}, Answer: "四", Split: "test"},
			{PromptID: "p3", Messages: []Message{}},
			{},
		})
	})
	t.Run("trajectories", func(t *testing.T) {
		checkRoundTrip(t, Trajectories, []Trajectory{
			{
				PromptID: "p1", SampleIndex: 3, GroupID: "p1/it0", Completion: "The answer is 4.",
				Turns: []Turn{
					{Role: "user", Content: "2+2?", Status: StatusOK},
					{Role: "assistant", Content: "", ToolCalls: ptr(`[{"name":"calc","arguments":{"x":"2+2"}}]`),
						TokenIDs: []int32{1, -2}, Logprobs: []float32{-0.5, 0}, Status: StatusOK},
					{Role: "tool", Content: "4", ToolCalls: ptr("")},
					{Role: "assistant", Content: "", TokenIDs: []int32{}, Logprobs: []float32{}, Status: StatusTruncated},
					{Role: "assistant", Content: "4", TokenIDs: []int32{math.MaxInt32}, Status: StatusEnvError},
				},
				TokenIDs: []int32{1, -2, math.MaxInt32}, Logprobs: []float32{-0.5, 0, float32(math.Inf(-1))},
				FinishReason: "stop", NumTokens: 3, PolicyVersion: "base+sha256:ab", Sampler: `{"temperature":1}`,
				Seed: math.MinInt64, Staleness: 2, Status: StatusOK,
			},
			{PromptID: "p1", SampleIndex: 4, TokenIDs: []int32{}, Logprobs: []float32{}, Status: StatusTimeout, Error: ptr("deadline exceeded after 30s")},
			{PromptID: "ü", Status: StatusEnvError, Error: ptr("")},
			{Status: StatusTruncated},
		})
	})
	t.Run("rewards", func(t *testing.T) {
		checkRoundTrip(t, Rewards, []Reward{
			{PromptID: "p1", SampleIndex: 0, Components: map[string]float64{"correct": 1, "format": 0.5}, Total: 1.5,
				SpecDigest: "sha256:00", VerifierOutputs: `{"math":{"ok":true}}`, JudgeOutputs: `{}`, Status: "ok"},
			{PromptID: "p1", SampleIndex: 1, Components: map[string]float64{"correct": math.Inf(1)}, Total: -0.0, Status: "error", Error: ptr("judge: 503")},
			{PromptID: "p2"},
		})
	})
	t.Run("advantages", func(t *testing.T) {
		checkRoundTrip(t, Advantages, []Advantage{
			{PromptID: "p1", SampleIndex: 0, Advantage: 0.70710678, GroupMean: 0.5, GroupStd: 0.5, GroupSize: 8},
			{PromptID: "p1", SampleIndex: 1, Mask: true, Reason: "status timeout", GroupSize: 8},
			{},
		})
	})
	t.Run("eval_samples", func(t *testing.T) {
		checkRoundTrip(t, EvalSamples, []EvalSample{
			{Checkpoint: "it-0003", Evalset: "aime24", ProblemID: "7", SampleIndex: 15, Completion: "…∑ = 42", Answer: "42", Correct: true, Reward: 1, Status: StatusOK},
			{},
		})
	})
	t.Run("eval_summary", func(t *testing.T) {
		checkRoundTrip(t, EvalSummary, []EvalSummaryRow{
			{Checkpoint: "it-0003", Evalset: "aime24", K: 8, N: 16, Metric: MetricPassAtK, Value: 0.4, CILow: 0.31, CIHigh: 0.49, NumProblems: 30},
			{Metric: MetricPassHatK, Value: math.SmallestNonzeroFloat64},
		})
	})
}

func TestRewardsComponents(t *testing.T) {
	rows := []Reward{
		{PromptID: "a", Components: map[string]float64{"format": 1}},
		{PromptID: "b", Components: map[string]float64{"correct": 0}},
	}
	data := writeRows(t, Rewards, rows, nil)
	rd, err := NewReader(bytes.NewReader(data), int64(len(data)), "r.parquet", Rewards, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rd.Table().Dynamic(), []string{"correct", "format"}; !reflect.DeepEqual(got, want) {
		t.Errorf("components %v, want %v", got, want)
	}
	var names []string
	for _, f := range rd.Schema().Fields() {
		names = append(names, f.Name)
	}
	want := []string{"prompt_id", "sample_index", "r_correct", "r_format", "total", "spec_digest", "verifier_outputs", "judge_outputs", "status", "error"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("columns %v, want %v", names, want)
	}

	// A streaming writer needs the components up front.
	tb, err := RewardsWith("format")
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(&bytes.Buffer{}, tb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rows...); err == nil {
		t.Error("writing a component without a column: no error")
	}
	for _, bad := range []string{"", "Correct", "9lives", "a-b", "r"} {
		if _, err := RewardsWith(bad, bad); err == nil {
			t.Errorf("RewardsWith(%q): no error", bad)
		}
	}
}

func TestWriteRejectsBadStatus(t *testing.T) {
	err := Write(&bytes.Buffer{}, Trajectories, []Trajectory{{Status: StatusOK}, {Status: "fine"}}, nil)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(`row 1: status "fine"`)) {
		t.Fatalf("err = %v, want one naming row 1 and the status", err)
	}
}

func TestRowGroupsBounded(t *testing.T) {
	rows := make([]Trajectory, 1000)
	for i := range rows {
		rows[i] = Trajectory{PromptID: "p", SampleIndex: int32(i), Completion: string(bytes.Repeat([]byte{'x'}, 100)), Status: StatusOK}
	}
	for _, tc := range []struct {
		name      string
		opts      WriteOptions
		minGroups int
		maxGroups int
	}{
		{"default", WriteOptions{}, 1, 1},
		{"rows", WriteOptions{RowGroupRows: 300, BatchRows: 128}, 4, 4},
		{"bytes", WriteOptions{RowGroupBytes: 20_000, BatchRows: 64}, 5, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := writeRows(t, Trajectories, rows, &tc.opts)
			f, err := OpenFile(bytes.NewReader(data), int64(len(data)), "t", nil)
			if err != nil {
				t.Fatal(err)
			}
			if n := f.NumRowGroups(); n < tc.minGroups || n > tc.maxGroups {
				t.Errorf("%d row groups, want %d..%d", n, tc.minGroups, tc.maxGroups)
			}
			got := readRows(t, Trajectories, data)
			for i := range got {
				if got[i].SampleIndex != int32(i) {
					t.Fatalf("row %d has sample_index %d", i, got[i].SampleIndex)
				}
			}
			// A subset of row groups reads just those rows.
			rd, err := NewReader(bytes.NewReader(data), int64(len(data)), "t", Trajectories, &ReadOptions{RowGroups: []int{f.NumRowGroups() - 1}, BatchRows: 7})
			if err != nil {
				t.Fatal(err)
			}
			var last []int32
			for r, err := range rd.Rows(context.Background()) {
				if err != nil {
					t.Fatal(err)
				}
				last = append(last, r.SampleIndex)
			}
			if len(last) == 0 || last[len(last)-1] != 999 {
				t.Errorf("last row group read %d rows ending %v", len(last), last[max(0, len(last)-1):])
			}
		})
	}
}

func TestMetadata(t *testing.T) {
	data := writeRows(t, Advantages, []Advantage{{PromptID: "x"}}, nil)
	f, err := OpenFile(bytes.NewReader(data), int64(len(data)), "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if name, v := f.Table(); name != AdvantagesName || v != 1 {
		t.Errorf("Table() = %q, %d", name, v)
	}
	md := f.Schema().Metadata()
	if i := md.FindKey(MetaTable); i < 0 || md.Values()[i] != AdvantagesName {
		t.Errorf("arrow schema metadata %v lacks %s", md, MetaTable)
	}
	if _, ok := f.Metadata("ARROW:schema"); !ok {
		t.Error("no ARROW:schema in the key-value metadata")
	}
	if !arrow.TypeEqual(f.Schema().Field(6).Type, arrow.FixedWidthTypes.Boolean) {
		t.Errorf("mask type %s", f.Schema().Field(6).Type)
	}
}

func TestWriteRecordAndRecords(t *testing.T) {
	src := writeRows(t, Prompts, []Prompt{{PromptID: "a"}, {PromptID: "b", Messages: []Message{{"user", "hi"}}}}, nil)
	rd, err := NewReader(bytes.NewReader(src), int64(len(src)), "p", Prompts, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := NewWriter(&out, Prompts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Prompt{PromptID: "first"}); err != nil {
		t.Fatal(err)
	}
	for rec, err := range rd.Records(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Schema().Equal(Prompts.Schema()) {
			t.Fatalf("record schema %s", rec.Schema())
		}
		if err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got := readRows(t, Prompts, out.Bytes())
	if len(got) != 3 || got[0].PromptID != "first" || got[2].Messages[0].Content != "hi" {
		t.Errorf("got %+v", got)
	}
	// A record of another schema is refused.
	other := writeRows(t, Advantages, []Advantage{{}}, nil)
	ard, _ := NewReader(bytes.NewReader(other), int64(len(other)), "a", Advantages, nil)
	for rec := range ard.Records(context.Background()) {
		if err := w.WriteRecord(rec); err == nil {
			t.Error("WriteRecord with the wrong schema: no error")
		}
	}
}

// Our own files read back with exactly the canonical types, so reading
// them converts nothing.
func TestFileTypesAreCanonical(t *testing.T) {
	for _, d := range All() {
		var buf bytes.Buffer
		w, err := NewRecordWriter(&buf, d.Schema(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f, err := OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()), d.Name(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range d.Columns() {
			if got := f.Schema().Field(i); got.Name != c.Name || !arrow.TypeEqual(got.Type, c.Type) || got.Nullable != c.Nullable {
				t.Errorf("%s: column %d read as %s, wrote %s %s nullable=%v", d.Name(), i, got, c.Name, c.Type, c.Nullable)
			}
		}
	}
}

package rewards

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// rowPrompts are prompts whose metadata is a JSON object, not JSON, empty
// and an object without the key the expressions read.
func rowPrompts() []tables.Prompt {
	return []tables.Prompt{
		{PromptID: "obj", Answer: "7", Metadata: `{"num_terms": 3, "ops": ["+", "-"]}`, Source: "rg:basic_arithmetic", Split: "train"},
		{PromptID: "text", Answer: "8", Metadata: `num_terms=3`, Source: "hand", Split: "test"},
		{PromptID: "empty", Answer: "9"},
		{PromptID: "other", Answer: "1", Metadata: `{"level": 2, "kind": "sum"}`},
	}
}

func rowTrajectory(id string) tables.Trajectory {
	return tables.Trajectory{PromptID: id, SampleIndex: 2, Completion: "x", FinishReason: "length", NumTokens: 41, Status: tables.StatusOK}
}

// scoreBoth scores one trajectory of prompt id with p through ScoreFile
// (the columnar path) and Score (one row), fails the test when they
// disagree, and returns the reward.
func scoreBoth(t *testing.T, p *Program, idx *Prompts, id string) tables.Reward {
	t.Helper()
	tr := rowTrajectory(id)
	got, _ := score(t, p, []tables.Trajectory{tr}, &ScoreOptions{Prompts: idx})
	pr, ok := idx.Lookup(id)
	one, err := p.Score(context.Background(), Row{Trajectory: tr, Prompt: pr, HasPrompt: ok}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := got[0], one
	if a.Status != b.Status || fmt.Sprint(a.Components) != fmt.Sprint(b.Components) || deref(a.Error) != deref(b.Error) {
		t.Fatalf("ScoreFile gives %+v, Score %+v", a, b)
	}
	return a
}

// TestRowVariable: CEL's row holds the columns a Python function
// receives, with the same parsing of metadata, on both scoring paths; a
// key a row lacks is that row's error, naming the key and the row.
func TestRowVariable(t *testing.T) {
	idx, err := NewPrompts(rowPrompts())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, expr, prompt string
		want               float64
		err                string
	}{
		{"a metadata number", "row.metadata.num_terms", "obj", 3, ""},
		{"a metadata list", "size(row.metadata.ops)", "obj", 2, ""},
		{"the answer", `row.answer == "7"`, "obj", 1, ""},
		{"source and split", `row.source == "rg:basic_arithmetic" && row.split == "train"`, "obj", 1, ""},
		{"trajectory columns", `double(row.sample_index * 100 + row.num_tokens)`, "obj", 241, ""},
		{"finish reason, status, prompt id", `row.finish_reason == "length" && row.status == "ok" && row["prompt_id"] == "obj"`, "obj", 1, ""},
		{"metadata that is not JSON is {}", "double(size(row.metadata))", "text", 0, ""},
		{"no metadata is {}", "double(size(row.metadata))", "empty", 0, ""},
		{"has() on a metadata key", "has(row.metadata.num_terms) ? 1.0 : 0.0", "other", 0, ""},
		{"a metadata key the row lacks", "row.metadata.num_terms", "other", 0,
			`component c: no such key: num_terms (row of prompt "other", sample 2: metadata keys kind, level)`},
		{"a prompt not in the table", "row.metadata.num_terms", "nowhere", 0,
			`component c: prompt "nowhere" is not in the prompts table`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mustCompile(t, "components:\n  - name: c\n    expr: '"+c.expr+"'\n")
			r := scoreBoth(t, p, idx, c.prompt)
			if c.err != "" {
				if r.Status != StatusError || r.Error == nil || *r.Error != c.err {
					t.Fatalf("reward %+v, error %v; want status error, %q", r, deref(r.Error), c.err)
				}
				return
			}
			if r.Status != StatusOK || r.Components["c"] != c.want {
				t.Fatalf("reward %+v, error %v; want c = %v", r, deref(r.Error), c.want)
			}
		})
	}
}

// TestRowMetadataDiffers records how row.metadata and metadata differ on
// metadata that is not a JSON object: row's is {} (as a Python function
// receives it), metadata's reading is the row's error.
func TestRowMetadataDiffers(t *testing.T) {
	idx, _ := NewPrompts(rowPrompts())
	p := mustCompile(t, "components:\n  - name: c\n    expr: 'double(size(metadata))'\n")
	r := scoreBoth(t, p, idx, "text")
	want := `component c: metadata of prompt "text" is not a JSON object: invalid character 'm' in literal null (expecting 'l')`
	if r.Status != StatusError || deref(r.Error) != want {
		t.Fatalf("reward %+v, error %s; want %s", r, deref(r.Error), want)
	}
}

// TestRowPlan: row.NAME names a column at compile time, and reading row
// needs the prompts table's columns of Row.Columns only.
func TestRowPlan(t *testing.T) {
	for _, c := range []struct{ name, expr, want string }{
		{"a misspelt column", "row.answr", `spec.yaml:3:15: component "c": row.answr is not a column of the row; its columns are answer, finish_reason, metadata, num_tokens, prompt_id, sample_index, source, split, status (did you mean "answer"?)`},
		{"a metadata key read as a column", `row["num_terms"] == 3.0`, `spec.yaml:3:15: component "c": row.num_terms is not a column of the row; its columns are answer, finish_reason, metadata, num_tokens, prompt_id, sample_index, source, split, status (a key of the metadata is row.metadata.num_terms)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := ParseSpec("spec.yaml", []byte("components:\n  - name: c\n    expr: '"+c.expr+"'\n"))
			if err != nil {
				t.Fatal(err)
			}
			if err := Check(s); err == nil || err.Error() != c.want {
				t.Fatalf("Check = %v\nwant   %s", err, c.want)
			}
		})
	}
	p := mustCompile(t, "components:\n  - name: c\n    expr: 'row.metadata.level'\n")
	if got := fmt.Sprint(p.PromptColumns()); got != "[prompt_id answer metadata source split]" {
		t.Errorf("PromptColumns = %s", got)
	}
	if !p.UsesPrompts() {
		t.Error("a spec that reads row does not use the prompts table")
	}
	if _, err := ParseSpec("spec.yaml", []byte("components:\n  - name: row\n    expr: '1.0'\n")); err == nil || !strings.Contains(err.Error(), `name "row" is taken by a CEL variable`) {
		t.Errorf("a component named row: %v", err)
	}
}

// TestRowColumns: the keys of Row.Columns are RowColumns, and its
// metadata parsing is the one the Python functions always had.
func TestRowColumns(t *testing.T) {
	for _, c := range []struct{ name, metadata, want string }{
		{"an object", `{"a": 1}`, "map[a:1]"},
		{"not JSON", `a=1`, "map[]"},
		{"a list", `[1, 2]`, "map[]"},
		{"null", `null`, "map[]"},
		{"empty", ``, "map[]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Row{Trajectory: rowTrajectory("p"), Prompt: tables.Prompt{PromptID: "p", Metadata: c.metadata}}
			cols := r.Columns()
			var keys []string
			for k := range cols {
				keys = append(keys, k)
			}
			if len(keys) != len(RowColumns) {
				t.Fatalf("columns %v, want %v", keys, RowColumns)
			}
			for _, k := range RowColumns {
				if _, ok := cols[k]; !ok {
					t.Fatalf("no column %s in %v", k, cols)
				}
			}
			if got := fmt.Sprint(cols["metadata"]); got != c.want {
				t.Fatalf("metadata %s, want %s", got, c.want)
			}
		})
	}
}

// TestMissingKeyMessage: the row is named in a missing key's message only
// in a spec that reads row; one that reads metadata alone keeps CEL's.
func TestMissingKeyMessage(t *testing.T) {
	idx, _ := NewPrompts(rowPrompts())
	for _, c := range []struct{ name, expr, want string }{
		{"metadata", "metadata.num_terms", "component c: no such key: num_terms"},
		{"row.metadata", "row.metadata.num_terms", `component c: no such key: num_terms (row of prompt "other", sample 2: metadata keys kind, level)`},
		{"metadata in a spec that reads row", `row.answer == "1" ? metadata.num_terms : 0.0`, `component c: no such key: num_terms (row of prompt "other", sample 2: metadata keys kind, level)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mustCompile(t, "components:\n  - name: c\n    expr: '"+c.expr+"'\n")
			if r := scoreBoth(t, p, idx, "other"); r.Status != StatusError || deref(r.Error) != c.want {
				t.Fatalf("reward %+v, error %s; want %s", r, deref(r.Error), c.want)
			}
		})
	}
}

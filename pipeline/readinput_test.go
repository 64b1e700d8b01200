package pipeline_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// TestReadInput checks how ReadInput classifies what goes wrong: a
// missing input or an unreadable table is permanent; a table it reads is
// its rows.
func TestReadInput(t *testing.T) {
	st := standintest.NewStore(t, 0)
	ctx := context.Background()
	put := func(path string, b []byte) {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	good := t.TempDir() + "/prompts.parquet"
	if err := tables.WriteFile(good, tables.Prompts, []tables.Prompt{{PromptID: "p1"}}, nil); err != nil {
		t.Fatal(err)
	}
	bad := t.TempDir() + "/bad.parquet"
	put(bad, []byte("not parquet"))
	for _, f := range []struct{ src, dst string }{{good, "in/good.parquet"}, {bad, "in/bad.parquet"}} {
		b, _ := os.ReadFile(f.src)
		if _, err := st.PutObject(ctx, "main", f.dst, strings.NewReader(string(b)), nil); err != nil {
			t.Fatal(err)
		}
	}
	var got map[string]error
	var rows []tables.Prompt
	task := &pipeline.Task{Name: "read", Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
		got = map[string]error{}
		rows, got["good"] = pipeline.ReadInput(tc, "good", tables.Prompts)
		_, got["bad"] = pipeline.ReadInput(tc, "bad", tables.Prompts)
		_, got["absent"] = pipeline.ReadInput(tc, "absent", tables.Prompts)
		return nil
	}}
	r := openRun(t, st, pipeline.RunOptions{})
	in := map[string]pipeline.Artifact{"good": pipeline.StoreArtifact("main", "in/good.parquet"), "bad": pipeline.StoreArtifact("main", "in/bad.parquet")}
	if err := r.Iteration(1).Go(ctx, task, pipeline.Call{Inputs: in}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got["good"] != nil || len(rows) != 1 || rows[0].PromptID != "p1" {
		t.Errorf("good: %v, rows %+v", got["good"], rows)
	}
	if !errors.Is(got["bad"], pipeline.ErrPermanent) || !strings.HasPrefix(got["bad"].Error(), "read bad: ") {
		t.Errorf("bad table: %v, want a permanent error", got["bad"])
	}
	if !errors.Is(got["absent"], pipeline.ErrPermanent) || got["absent"].Error() != `task read: no "absent" input` {
		t.Errorf("absent input: %v", got["absent"])
	}
}

// Package arithmeticvllm holds the test of the arithmetic pipeline sampled
// by a real vLLM: see pipeline.yaml and README.md.
package arithmeticvllm

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/examples/exampletest"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/policy/vllmserver"
	"github.com/rlpipe/rlpipe/policy/vllmserver/vllmtest"
)

// pipeline.yaml as shipped, its 20 iterations and its evaluation every 5
// (8 samples per problem instead of 16), against vLLM serving the
// exported tiny-arith on a free loopback port: every iteration samples
// from the previous iteration's adapter hot-loaded into vLLM, with the
// token ids and logprobs vLLM returned, the embedded trainer trains on
// them, and held-out pass@1 rises. vLLM keeps one adapter in its LoRA
// cache and reads an evicted one again from the path it was loaded from,
// so the run lives only while those paths do (it stopped at iteration 7
// when they were the tasks' scratch folders). Skipped without a venv with
// vLLM.
func TestPipelineWithVLLM(t *testing.T) {
	py := exampletest.VLLMPython(t, "starts vLLM and trains for 20 iterations")
	cache := t.TempDir() // rlpipe's copies of the adapters vLLM holds
	t.Setenv("XDG_CACHE_HOME", cache)
	model := vllmtest.Export(t, "tiny-arith")
	srv := vllmtest.Start(t, vllmserver.Options{Python: py, Model: model, Name: "tiny-arith"})

	src := exampletest.Config(t, "pipeline.yaml", map[string]string{
		"http://127.0.0.1:8011":           srv.URL(),
		"spec: ../arithmetic/reward.yaml": "spec: " + exampletest.Abs(t, "../arithmetic/reward.yaml"),
		"n: 16":                           "n: 8",
		"k: [1, 4, 16]":                   "k: [1, 8]",
	})
	e := exampletest.New(t, srv.LogTail)
	e.Rlpipe("init-store")
	e.Rlpipe("dataset", "arith", "main", "--train", "1024", "--heldout", "200")
	e.Rlpipe("run", "-f", e.Write("pipeline.yaml", src), "--no-report")

	evals := e.Evals("arith-vllm")
	var evaluated []int
	for _, e := range evals {
		evaluated = append(evaluated, e.Iteration)
	}
	if !slices.Equal(evaluated, []int{0, 5, 10, 15, 20}) || evals[0].Checkpoint != "base" {
		t.Fatalf("evaluated iterations %v (%+v): want the base model, then 5, 10, 15 and 20", evaluated, evals)
	}
	first, final := evals[0], evals[len(evals)-1]
	base, last := first.Metrics["pass@1"], final.Metrics["pass@1"]
	t.Logf("held-out pass@1 sampled by vLLM: base %.4f, iteration 20 %.4f (%+.2f points); pass@8 %.4f → %.4f",
		base, last, 100*(last-base), first.Metrics["pass@8"], final.Metrics["pass@8"])
	if last <= base+0.02 {
		t.Errorf("held-out pass@1 went from %.4f to %.4f: training should raise it by more than 2 points", base, last)
	}

	// With overlap (max_staleness 1) iteration N samples from the adapter
	// of iteration N-2: the first two from the base, every later one from
	// a new adapter through vLLM, each sample with the ids and logprobs
	// vLLM returned.
	s := e.Open()
	versions := map[string]bool{}
	for it := 1; it <= 20; it++ {
		exampletest.SampledFromNewAdapters(t, s, branch, it, "tiny-arith", versions)
	}
	// What vLLM sampled is what the embedded engine would score: the
	// logprobs vLLM returned for its own tokens, from the base
	// (iteration 1) and from an adapter the embedded trainer wrote
	// (iteration 16 samples iteration 14's), against the Go model's on the
	// same token ids.
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ sampled, adapter int }{{1, 0}, {20, 18}} {
		var a *tiny.Adapter
		if c.adapter > 0 {
			if a, err = m.LoadAdapter(exampletest.Adapter(t, s, branch, c.adapter)); err != nil {
				t.Fatal(err)
			}
		}
		prompts := standintest.ReadRows(t, s, branch, runs.IterationPath(c.sampled, runs.PromptsFile), tables.Prompts)
		worst := maxLogprobGap(t, m, a, prompts, readTrajectories(t, s, c.sampled))
		t.Logf("iteration %d: vLLM's logprobs and the embedded model's on the same %s tokens differ by at most %.2g", c.sampled,
			map[bool]string{true: "base", false: fmt.Sprintf("iteration-%d-adapter", c.adapter)}[a == nil], worst)
		if worst > 1e-4 {
			t.Errorf("iteration %d: vLLM's and the embedded model's logprobs differ by %.3g, want ≤ 1e-4", c.sampled, worst)
		}
	}

	// The run unloaded its adapters when it ended: vLLM serves the base
	// alone, and rlpipe's copies of them are gone.
	if models := vllmtest.Models(t, srv.URL()); len(models) != 1 || models[0].ID != "tiny-arith" {
		t.Errorf("vLLM serves %+v after the run: want the base model alone", models)
	}
	if es, err := os.ReadDir(filepath.Join(cache, "rlpipe", "adapters")); err != nil || len(es) != 0 {
		t.Errorf("rlpipe's adapter folder holds %v (%v) after the run: want nothing", es, err)
	}
}

// maxLogprobGap scores every sample's token ids with the embedded model
// (and adapter a) after its prompt's tokens and returns the largest gap to
// the logprobs vLLM returned with them.
func maxLogprobGap(t *testing.T, m *tiny.Model, a *tiny.Adapter, prompts []tables.Prompt, rows []tables.Trajectory) float64 {
	t.Helper()
	text := map[string]string{}
	for _, p := range prompts {
		text[p.PromptID] = p.Prompt
	}
	var batch []tiny.Example
	for _, r := range rows {
		ids, err := m.Tokenize(text[r.PromptID])
		if err != nil {
			t.Fatalf("prompt %s: %v", r.PromptID, err)
		}
		batch = append(batch, tiny.Example{Prompt: ids, Completion: r.TokenIDs})
	}
	got, _, err := m.Score(context.Background(), a, batch)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i, r := range rows {
		for j, lp := range r.Logprobs {
			worst = max(worst, math.Abs(float64(got[i][j]-lp)))
		}
	}
	return worst
}

func readTrajectories(t *testing.T, s artifacts.Store, it int) []tables.Trajectory {
	t.Helper()
	return standintest.ReadRows(t, s, branch, runs.IterationPath(it, runs.TrajectoriesFile), tables.Trajectories)
}

// branch is the run's branch.
const branch = "runs-arith-vllm"

package cli

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/configtest"
)

// TestArithmeticDemoLearns runs examples/arithmetic/pipeline.yaml cut to
// 16 iterations and a 200-problem held-out set, as `make demo` runs the
// full one, and checks through `status -o json` that training moved the
// held-out metric up — exact figures, since the run is deterministic —
// and that a rerun with the same seed commits the same artifacts.
//
// Under -race (raceOn), where the detector slows the embedded model's
// arithmetic 5–10×, it runs 2 iterations evaluated on 50 held-out
// problems × 4 samples (not 200 × 8): the same commands, loop,
// evaluation and rerun under the detector, checked to that run's exact
// figures. `make test` runs the full test without -race in a line of
// its own (Makefile).
func TestArithmeticDemoLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the embedded model for 16 iterations")
	}
	// The seeded held-out exact pass@1 of the base model and after the
	// last iteration.
	iterations, heldout, n, wantBase, wantLast := 16, 200, 8, 0.313607035084, 0.700917566587
	if raceOn {
		iterations, heldout, n, wantBase, wantLast = 2, 50, 4, 0.251603709708, 0.446971667377 // measured, seeded
	}
	src := arithExample(t, map[string]string{
		"iterations: 60":   fmt.Sprintf("iterations: %d", iterations),
		"every: 10":        fmt.Sprintf("every: %d", iterations),
		"n: 16":            fmt.Sprintf("n: %d", n),
		"k: [1, 4, 8, 16]": fmt.Sprintf("k: [1, %d]", n),
	})
	h, cfg, st := runDemo(t, src, "arith", heldout, iterations)
	base, last := st.Evals[0].Metrics["exact_pass@1"], st.Evals[1].Metrics["exact_pass@1"]
	pk := fmt.Sprintf("pass@%d", n)
	t.Logf("held-out exact pass@1: base %.12f, iteration %d %.12f (%+.2f points); %s %.4f → %.4f",
		base, iterations, last, 100*(last-base), pk, st.Evals[0].Metrics[pk], st.Evals[1].Metrics[pk])
	// Fixed seed: these are exact (to float rounding in the summary).
	if math.Abs(base-wantBase) > 1e-9 || math.Abs(last-wantLast) > 1e-9 {
		t.Errorf("exact pass@1 %.12f → %.12f, want %.12f → %.12f (seeded)", base, last, wantBase, wantLast)
	}
	if last <= base+0.02 {
		t.Errorf("held-out exact pass@1 went from %.4f to %.4f: training should raise it by more than 2 points", base, last)
	}
	// A second run with the same seed commits the same artifacts.
	h.ok("run", "-f", cfg, "--run", "arith-again")
	out := h.ok("diff", "runs-arith", "runs-arith-again", "--two-dot", "--prefix", "iterations/")
	if strings.TrimSpace(out) != "" && !strings.Contains(out, "no changes") {
		t.Errorf("a rerun with the same seed differs:\n%s", out)
	}
}

// TestArithmeticFullDemoLearns runs examples/arithmetic-full (full
// fine-tuning, lora: none) as TestArithmeticDemoLearns runs the LoRA
// demo: 16 iterations on a 200-problem held-out set, exact seeded
// figures through `status -o json`, and a gain of at least 10 points;
// every iteration commits the whole model and the next one samples it.
// Under -race it runs 1 iteration on 30 problems × 4 samples.
func TestArithmeticFullDemoLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the embedded model for 16 iterations")
	}
	iterations, heldout, n, wantBase, wantLast := 16, 200, 8, 0.313607035084, 0.712020824671
	if raceOn {
		iterations, heldout, n, wantBase, wantLast = 1, 30, 4, 0.307045066880, 0.456401330305 // measured, seeded
	}
	src := readFile(t, "../examples/arithmetic-full/pipeline.yaml")
	src = configtest.Edit(t, "the example", src, map[string]string{
		"spec: ../arithmetic/reward.yaml": "spec: " + configtest.Abs(t, "../examples/arithmetic/reward.yaml"),
		"iterations: 20":                  fmt.Sprintf("iterations: %d", iterations),
		"every: 10":                       fmt.Sprintf("every: %d", iterations),
		"n: 16":                           fmt.Sprintf("n: %d", n),
		"k: [1, 4, 8, 16]":                fmt.Sprintf("k: [1, %d]", n),
	})
	h, _, st := runDemo(t, src, "arith-full", heldout, iterations)
	base, last := st.Evals[0].Metrics["exact_pass@1"], st.Evals[1].Metrics["exact_pass@1"]
	t.Logf("held-out exact pass@1: base %.12f, iteration %d %.12f (%+.2f points)", base, iterations, last, 100*(last-base))
	if math.Abs(base-wantBase) > 1e-9 || math.Abs(last-wantLast) > 1e-9 {
		t.Errorf("exact pass@1 %.12f → %.12f, want %.12f → %.12f (seeded)", base, last, wantBase, wantLast)
	}
	if last < base+0.10 {
		t.Errorf("held-out exact pass@1 went from %.4f to %.4f: full fine-tuning should raise it by at least 10 points", base, last)
	}
	// The last checkpoint is a full model directory, not an adapter.
	out := h.ok("ls", fmt.Sprintf("runs-arith-full:iterations/%06d/adapter/", iterations))
	for _, f := range []string{"config.json", "model.safetensors", "optimizer.safetensors"} {
		if !strings.Contains(out, f) {
			t.Errorf("the last checkpoint lacks %s:\n%s", f, out)
		}
	}
	if strings.Contains(out, "adapter_config.json") {
		t.Errorf("the last checkpoint of a full fine-tune holds a PEFT adapter:\n%s", out)
	}
}

// runDemo runs the pipeline src of run on a fresh store holding the
// arithmetic dataset (1,024 training problems, heldout held out) and
// returns the harness, the config file and the run's status, whose evals
// it checks are the base model and the last iteration.
func runDemo(t *testing.T, src, run string, heldout, iterations int) (*harness, string, runStatusOut) {
	t.Helper()
	h := newStore(t)
	h.ok("dataset", "arith", "main", "--train", "1024", "--heldout", fmt.Sprint(heldout))
	cfg := h.file("pipeline.yaml", src)
	h.ok("run", "-f", cfg)
	var st runStatusOut
	h.json(&st, "status", run)
	if len(st.Evals) != 2 || st.Evals[0].Checkpoint != "base" || st.Evals[1].Iteration != iterations {
		t.Fatalf("evals %+v: want the base model, then iteration %d", st.Evals, iterations)
	}
	return h, cfg, st
}

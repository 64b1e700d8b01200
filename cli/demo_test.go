package cli

import (
	"math"
	"strings"
	"testing"
)

// TestArithmeticDemoLearns runs examples/arithmetic/pipeline.yaml cut to
// 16 iterations and a 200-problem held-out set, as `make demo` runs the
// full one, and checks through `status -o json` that training moved the
// held-out metric up — exact figures, since the run is deterministic.
func TestArithmeticDemoLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the embedded model for 16 iterations")
	}
	src := arithExample(t, map[string]string{
		"iterations: 60":   "iterations: 16",
		"every: 10":        "every: 16",
		"n: 16":            "n: 8",
		"k: [1, 4, 8, 16]": "k: [1, 8]",
	})
	h := newStore(t)
	h.ok("dataset", "arith", "main", "--train", "1024", "--heldout", "200")
	cfg := h.file("pipeline.yaml", src)
	h.ok("run", "-f", cfg)
	var st runStatusOut
	h.json(&st, "status", "arith")
	if len(st.Evals) != 2 || st.Evals[0].Checkpoint != "base" || st.Evals[1].Iteration != 16 {
		t.Fatalf("evals %+v: want the base model, then iteration 16", st.Evals)
	}
	base, last := st.Evals[0].Metrics["exact_pass@1"], st.Evals[1].Metrics["exact_pass@1"]
	t.Logf("held-out exact pass@1: base %.12f, iteration 16 %.12f (%+.2f points); pass@8 %.4f → %.4f",
		base, last, 100*(last-base), st.Evals[0].Metrics["pass@8"], st.Evals[1].Metrics["pass@8"])
	// Fixed seed: these are exact (to float rounding in the summary).
	if math.Abs(base-0.313607035084) > 1e-9 || math.Abs(last-0.700917566587) > 1e-9 {
		t.Errorf("exact pass@1 %.12f → %.12f, want 0.313607035084 → 0.700917566587 (seeded)", base, last)
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

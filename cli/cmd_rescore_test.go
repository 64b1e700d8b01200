package cli

import (
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/rewards/rescore"
)

func TestRescore(t *testing.T) {
	h, cfg := newRunHarness(t, "1ms")
	h.ok("run", "-f", cfg) // its sample stage copies all 40 prompts: 3 × 40 × 4 samples
	spec := h.file("fixed.yaml", `components:
  - name: correct
    expr: 'num_equal(extract_answer(completion), answer, 1e-9) ? 1.0 : 0.0'
    weight: 1.0
  - name: format
    expr: 'completion.contains("####") ? 1.0 : 0.0'
    weight: 0.2
`)
	var rep rescore.Report
	h.json(&rep, "rescore", "--from", "runs-standin", "--reward", spec, "--branch", "try-fixed")
	c := rep.Comparison
	if rep.Branch != "try-fixed" || len(rep.Iterations) != 3 || c.Samples != 480 || c.Scored != 480 || len(c.Components) != 3 || c.Components[1].Name != "format" || c.Components[1].Old != nil {
		t.Fatalf("report = %+v", rep)
	}
	// Only rewards changed: the diff lists rewards files and the report.
	out := h.ok("diff", "runs-standin", "try-fixed", "--two-dot", "--prefix", "iterations/")
	if strings.Count(out, "rewards.parquet") != 3 || strings.Contains(out, "trajectories") {
		t.Fatalf("diff:\n%s", out)
	}
	text := h.ok("rescore", "--from", "runs-standin", "--reward", spec, "--branch", "try-fixed")
	if !strings.Contains(text, "3 iterations (3 already rescored)") || !strings.Contains(text, "COMPONENT") {
		t.Fatalf("text report:\n%s", text)
	}
	h.fails(2, []string{"--from", "--reward"}, "rescore")
	h.fails(1, []string{"bad.yaml"}, "rescore", "--from", "runs-standin", "--reward", h.file("bad.yaml", "components:\n  - name: x\n    expr: 'nope + 1'\n    weight: 1\n"))
}

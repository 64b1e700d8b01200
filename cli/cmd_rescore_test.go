package cli

import (
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
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
	var rep tables.RescoreReport
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

func TestRewardsCheck(t *testing.T) {
	h, cfg := newRunHarness(t, "1ms")
	h.ok("run", "-f", cfg)
	spec := h.file("fixed.yaml", `components:
  - name: correct
    expr: 'num_equal(extract_answer(completion), answer, 1e-9) ? 1.0 : 0.0'
    weight: 1.0
  - name: strict
    expr: 'parse_number(extract_answer(completion)) > 50.0 ? 1.0 : 0.0'
    weight: 1.0
`)
	if out := h.ok("rewards", "check", spec); !strings.Contains(out, "ok, 2 components, correct when correct >= 0.5, digest sha256:") {
		t.Fatalf("check:\n%s", out)
	}
	out := h.ok("rewards", "check", spec, "--sample", "runs-standin:iterations/000001/trajectories.parquet", "--rows", "3")
	if !strings.Contains(out, "PROMPT") || !strings.Contains(out, "3 rows: 3 scored, 0 skipped, 0 errors, 0 nonfinite\n") {
		t.Fatalf("sample:\n%s", out)
	}
	// Bad specs: an unknown variable, a weight that is not a number, a total naming a missing component.
	for name, c := range map[string]struct{ text, want string }{
		"unknown variable": {"components:\n  - name: x\n    expr: 'answr == \"1\" ? 1.0 : 0.0'\n", "bad.yaml:3"},
		"weight":           {"components:\n  - name: x\n    expr: '1.0'\n    weight: heavy\n", "bad.yaml:4"},
		"total":            {"components:\n  - name: x\n    expr: '1.0'\ntotal: 'x + y'\n", "bad.yaml:4"},
	} {
		t.Run(name, func(t *testing.T) {
			h.fails(1, []string{c.want}, "rewards", "check", h.file("bad.yaml", c.text))
		})
	}
}

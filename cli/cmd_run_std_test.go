package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/configtest"
)

// advantagesVersionAt is the task version of the advantages table of
// iteration n at ref, as rlpipe stat reports it.
func advantagesVersionAt(h *harness, ref string, n string) string {
	h.t.Helper()
	var st struct {
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(h.ok("stat", ref+":iterations/"+n+"/advantages.parquet", "-o", "json")), &st); err != nil {
		h.t.Fatal(err)
	}
	return st.Metadata["rlpipe-task-version"]
}

// TestResumeKeepsTheRunsStd: the sample std became the default (issue
// 36); a run whose committed iterations divided by the population std (as
// every run before did; std: population writes the same task version)
// resumes with it when its file does not say which std, warns saying so
// and records std: population in its effective config. A file that says
// std: sample switches on purpose; a new run gets the sample std.
func TestResumeKeepsTheRunsStd(t *testing.T) {
	h := newStore(t)
	h.ok("dataset", "arith", "main", "--train", "256", "--heldout", "50")
	const population = "join-2 epsilon=1e-06 no_std=false keep_zero_std=false"
	const sample = population + " std=sample"
	src := func(iterations, advantages string) string {
		s := arithExample(t, map[string]string{"iterations: 60": "iterations: " + iterations, "n: 16": "n: 2", "k: [1, 4, 8, 16]": "k: [1]"})
		if advantages != "" {
			s = configtest.Edit(t, "the example", s, map[string]string{"trainer: {lr: 2.0e-3}": "trainer: {lr: 2.0e-3}\nadvantages: " + advantages})
		}
		return s
	}
	// A run of one iteration with the population std: what a run made
	// before the flip wrote.
	h.ok("run", "-f", h.file("old.yaml", src("1", "{std: population}")))
	if v := advantagesVersionAt(h, "runs-arith", "000001"); v != population {
		t.Fatalf("iteration 1: version %q, want %q", v, population)
	}

	// Resumed with a file that says nothing about std: iteration 2 keeps
	// the population std.
	resumed := h.file("resumed.yaml", src("2", ""))
	r := h.run("run", "-f", resumed)
	if r.code != ExitOK {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	if v := advantagesVersionAt(h, "runs-arith", "000002"); v != population {
		t.Errorf("iteration 2 after the resume: version %q, want %q (the run's std)", v, population)
	}
	warning := "runs-arith:iterations/000001/advantages.parquet divides by the population std (the default before the sample std): the run resumes with it; set advantages.std in " +
		resumed + " to sample to switch, or to population to say so"
	if !strings.Contains(r.stderr, warning) {
		t.Errorf("resume: stderr lacks the warning %q:\n%s", warning, r.stderr)
	}
	if cfg := h.ok("cat", "runs-arith:run/config.yaml"); !strings.Contains(cfg, "advantages:\n  std: population\n") {
		t.Errorf("the recorded config does not say std: population:\n%s", cfg)
	}

	// The file says sample: a change of estimator mid-run, refused unless
	// asked for; with --allow-config-change iteration 3 switches, without
	// the warning.
	switched := h.file("switched.yaml", src("3", "{std: sample}"))
	h.fails(ExitFailure, []string{"advantages.std population → sample"}, "run", "-f", switched)
	r = h.run("run", "-f", switched, "--allow-config-change")
	if r.code != ExitOK || strings.Contains(r.stderr, "population std") {
		t.Fatalf("switch: exit %d\n%s", r.code, r.stderr)
	}
	if v := advantagesVersionAt(h, "runs-arith", "000003"); v != sample {
		t.Errorf("iteration 3 with std: sample: version %q, want %q", v, sample)
	}

	// A new run without the key: the sample std.
	r = h.run("run", "-f", h.file("new.yaml", src("1", "")), "--run", "fresh")
	if r.code != ExitOK || strings.Contains(r.stderr, "population std") {
		t.Fatalf("new run: exit %d\n%s", r.code, r.stderr)
	}
	if v := advantagesVersionAt(h, "runs-fresh", "000001"); v != sample {
		t.Errorf("a new run: version %q, want %q", v, sample)
	}
}

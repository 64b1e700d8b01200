package cli

import (
	"strings"
	"testing"
)

// TestRunFewerIterationsThanCommitted: running a finished run again with
// a smaller iterations does nothing, and says so with exit 1 at the
// iterations key, naming both numbers and the two ways on; it printed
// "iteration 3 of 1 committed" and exited 0. The same iterations still
// reports the finished run with exit 0.
func TestRunFewerIterationsThanCommitted(t *testing.T) {
	h, cfg := newRunHarness(t, "1ms")
	var first runOut
	h.json(&first, "run", "-f", cfg)
	fewer := h.file("fewer.yaml", strings.Replace(readFile(t, cfg), "iterations: 3", "iterations: 1", 1))
	want := "rlpipe: " + fewer + ":12:1: iterations: 1, but run standin already has 3 iterations committed (runs-standin at " + shortID(first.Commit) +
		"); nothing was run (to go on, raise iterations above 3 and run again; for a run of 1 iteration, give it a new name: rlpipe run -f " + fewer + " --run NAME)\n"
	// Before the message, a warning that the config differs from the run's.
	if got := h.fails(ExitFailure, nil, "run", "-f", fewer, "--no-report"); !strings.HasSuffix(got, want) || strings.Count(got, "rlpipe: ") != 1 {
		t.Fatalf("stderr\n%s\nwant it to end with\n%s", got, want)
	}
	var again runOut
	h.json(&again, "run", "-f", cfg)
	if again.Iterations != 3 || again.NewIterations != 0 || again.Commit != first.Commit {
		t.Errorf("the same config again: %+v, want iteration 3, none new, commit %s", again.Summary, first.Commit)
	}
}

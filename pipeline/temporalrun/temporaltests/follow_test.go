package temporaltests_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestRunShowsAStandbyDriversIterations runs the stand-in pipeline for two
// iterations with the loop driven by a standby `rlpipe worker --driver`
// (the `rlpipe run` has --no-driver, so no other process can take it):
// the waiting `rlpipe run` prints each iteration's lines exactly as the
// standby that committed them does, before its summary, and logs a
// run.progress event for each iteration as a driving run does.
func TestRunShowsAStandbyDriversIterations(t *testing.T) {
	cfg, setup := standinConfig(t, "100ms")
	c := newCluster(t, setup)
	standby := c.worker("standby", cfg, "--env", "sample,generate,reward,train,health", "--driver", "iterations=2")
	run := c.start("run", c.runArgs(cfg, "--no-driver", "--no-report", "iterations=2")...)
	if err := run.wait(t); err != nil {
		t.Fatalf("run: %v\n%s", err, run.stderr.String())
	}
	want := nonEmptyLines(standby.stdout.String())
	if len(want) < 2 || !strings.HasPrefix(want[0], "iteration 1:") || !strings.HasPrefix(want[len(want)-1], "iteration 2:") {
		t.Fatalf("the standby driver did not run both iterations; its output:\n%s", standby.stdout.String())
	}
	lines := nonEmptyLines(run.stdout.String())
	if len(lines) < len(want) || !slices.Equal(lines[:len(want)], want) {
		t.Errorf("run printed\n%s\nwant the standby's iteration lines first:\n%s", run.stdout.String(), strings.Join(want, "\n"))
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "run standin: iteration 2 of 2 committed as ") {
		t.Errorf("run's last line is %q, want its summary", last)
	}
	var progress []int
	for _, l := range nonEmptyLines(run.stderr.String()) {
		var ev struct {
			Event      string `json:"event"`
			Run        string `json:"run"`
			Iteration  int    `json:"iteration"`
			Iterations int    `json:"iterations"`
		}
		if json.Unmarshal([]byte(l), &ev) != nil || ev.Event != "run.progress" {
			continue
		}
		if ev.Run != "standin" || ev.Iterations != 2 {
			t.Errorf("run.progress event %s: want run standin of 2 iterations", l)
		}
		progress = append(progress, ev.Iteration)
	}
	if !slices.Equal(progress, []int{1, 2}) {
		t.Errorf("run.progress events of iterations %v, want [1 2]; stderr:\n%s", progress, run.stderr.String())
	}
}

// nonEmptyLines are s's lines that hold something.
func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

package cli

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/pipeline"
)

// TestPace: the progress line's figures on a fake clock, from a fresh
// start and from a resumed run, before and after commits.
func TestPace(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type commit struct {
		n               int
		at              time.Duration
		samples, tokens float64
	}
	for _, tc := range []struct {
		name    string
		last    int
		resumed int // the run.resumed event's iteration (0: none)
		commits []commit
		now     time.Duration
		want    string
	}{
		{"nothing committed yet", 10, 0, nil, 1500 * time.Millisecond,
			"[--------------------] iteration 0/10  elapsed 1.5s  ETA -  - samples/s  - tokens/s"},
		{"two of ten, 10s each", 10, 0, []commit{{1, 10 * time.Second, 128, 640}, {2, 20 * time.Second, 128, 640}}, 25 * time.Second,
			"[####----------------] iteration 2/10  elapsed 25s  ETA 1m15s  12.8 samples/s  64 tokens/s"},
		{"resumed after 5: only this process's iterations count", 10, 6, []commit{{6, 30 * time.Second, 64, 100}}, 30 * time.Second,
			"[############--------] iteration 6/10  elapsed 30s  ETA 2m0s  2.1 samples/s  3 tokens/s"},
		{"a trainer without response lengths", 4, 0, []commit{{1, 2 * time.Second, 8, -1}}, 2 * time.Second,
			"[#####---------------] iteration 1/4  elapsed 2s  ETA 6s  4.0 samples/s  - tokens/s"},
		{"the last iteration", 2, 0, []commit{{1, time.Second, 8, 8}, {2, 2 * time.Second, 8, 8}}, 3 * time.Second,
			"[####################] iteration 2/2  elapsed 3s  ETA 0s  8.0 samples/s  8 tokens/s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPace(tc.last, t0)
			if tc.resumed > 0 {
				p.event(pipeline.Event{Kind: pipeline.EventResumed, Iteration: tc.resumed})
			}
			for _, c := range tc.commits {
				p.event(pipeline.Event{Kind: pipeline.EventCommitted, Iteration: c.n, Time: at(c.at)})
				p.volume(c.samples, c.tokens)
			}
			if got := p.figures(at(tc.now)).line(); got != tc.want {
				t.Errorf("line\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestProgressDrawsPace: on a terminal the progress line is the
// display's second line.
func TestProgressDrawsPace(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var b strings.Builder
	p := newProgress(&b, "exp1", 4)
	p.now = func() time.Time { return t0.Add(4 * time.Second) }
	p.pace = newPace(4, t0)
	p.pace.event(pipeline.Event{Kind: pipeline.EventCommitted, Iteration: 1, Time: t0.Add(2 * time.Second)})
	p.pace.volume(16, 80)
	p.event(pipeline.Event{Kind: pipeline.EventCommitted, Iteration: 1, Commit: "0123456789abcdef"})
	got := p.render()
	want := []string{
		"run exp1: iteration 1 of 4 committed (0123456789ab)",
		"  [#####---------------] iteration 1/4  elapsed 4s  ETA 4s  8.0 samples/s  40 tokens/s",
		"  STAGE     ITERATION  STATE    ATTEMPTS  CACHED  ELAPSED",
	}
	if len(got) < 3 || strings.Join(got[:3], "\n") != strings.Join(want, "\n") {
		t.Errorf("render:\n%s\nwant it to start:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRunProgressEvents: off a terminal each committed iteration logs a
// run.progress JSON event with the progress line's figures.
func TestRunProgressEvents(t *testing.T) {
	h, cfg := newRunHarness(t, "1ms")
	r := h.run("run", "-f", cfg, "--no-report", "iterations=2")
	if r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	var got []map[string]any
	sc := bufio.NewScanner(strings.NewReader(r.stderr))
	for sc.Scan() {
		var ev map[string]any
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev["event"] == "run.progress" {
			got = append(got, ev)
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d run.progress events, want 2:\n%s", len(got), r.stderr)
	}
	for i, ev := range got {
		// The stand-in trainer reports samples but no response length:
		// no tokens_per_s.
		if ev["run"] != "standin" || ev["iteration"] != float64(i+1) || ev["iterations"] != float64(2) ||
			ev["elapsed_s"] == nil || ev["eta_s"] == nil || ev["samples_per_s"] == nil || ev["tokens_per_s"] != nil {
			t.Errorf("event %d: %v", i, ev)
		}
	}
	if got[1]["eta_s"] != float64(0) {
		t.Errorf("the last iteration's eta_s = %v, want 0", got[1]["eta_s"])
	}
}

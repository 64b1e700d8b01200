package cli

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/pipeline"
)

func TestProgress(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var buf bytes.Buffer
	p := newProgress(&buf, "exp1", 10)
	p.now = func() time.Time { return t0.Add(1500 * time.Millisecond) }
	for _, e := range []pipeline.Event{
		{Kind: pipeline.EventResumed, Iteration: 3},
		{Kind: pipeline.EventCached, Stage: "sample", Iteration: 3},
		{Kind: pipeline.EventStarted, Stage: "generate", Iteration: 3, Attempt: 1, Time: t0},
		{Kind: pipeline.EventRetried, Stage: "generate", Iteration: 3, Attempt: 1, Duration: 200 * time.Millisecond, Error: "boom"},
		{Kind: pipeline.EventStarted, Stage: "generate", Iteration: 3, Attempt: 2, Time: t0},
		{Kind: pipeline.EventStarted, Stage: "train", Iteration: 2, Attempt: 1, Time: t0},
		{Kind: pipeline.EventFinished, Stage: "train", Iteration: 2, Attempt: 1, Duration: 2 * time.Second},
		{Kind: pipeline.EventStarted, Stage: "train", Iteration: 1, Attempt: 1, Time: t0}, // older: ignored
		{Kind: pipeline.EventCommitted, Iteration: 3, Commit: "0123456789abcdef"},
		{Kind: pipeline.EventFailed, Stage: "reward", Task: "reward", Iteration: 3, Attempt: 1, Error: "judge: 500"},
	} {
		p.event(e)
	}
	want := []string{
		"run exp1: iteration 3 of 10 committed (0123456789ab), resumed after 2",
		"  STAGE     ITERATION  STATE    ATTEMPTS  CACHED  ELAPSED",
		"  sample            3  cached          0       1        -",
		"  generate          3  running         2       0     1.5s",
		"  reward            3  failed          1       0        -",
		"  train             2  done            1       0       2s",
		"  ! reward (iteration 3) failed: judge: 500",
	}
	if got := p.render(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("render:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Each redraw moves back over the previous drawing.
	out := buf.String()
	if n := strings.Count(out, "\x1b[6F"); n < 1 || !strings.HasSuffix(out, "judge: 500\x1b[K\n") {
		t.Errorf("redraws: %q", out[max(0, len(out)-200):])
	}
}

func TestStatusNoRuns(t *testing.T) {
	h := newStore(t)
	if out := h.ok("status"); !strings.Contains(out, "no runs yet") {
		t.Errorf("status: %q", out)
	}
	var list statusListOut
	h.json(&list, "status")
	if list.Runs == nil || len(list.Runs) != 0 {
		t.Errorf("status -o json: %+v", list)
	}
}

// TestProgressWaitingForWorker checks that a task waiting for a worker of
// its environment keeps a row on screen, naming the environment and the
// command that serves it, through later redraws, until a task of that
// environment ends.
func TestProgressWaitingForWorker(t *testing.T) {
	const why = "no worker serves environment health of this pipeline yet: its tasks wait on queue q until one does (start `rlpipe worker --env health` with the same pipeline config and store)"
	steps := []struct {
		name  string
		event pipeline.Event
		want  string // the display's last line
	}{
		{"waiting", pipeline.Event{Kind: pipeline.EventWaiting, Stage: "health", Env: "health", Iteration: 1, Error: why}, "  ! waiting: " + why},
		{"another stage redraws", pipeline.Event{Kind: pipeline.EventFinished, Stage: "train", Env: "train", Iteration: 1, Attempt: 1, Duration: time.Second}, "  ! waiting: " + why},
		{"the worker came", pipeline.Event{Kind: pipeline.EventFinished, Stage: "health", Env: "health", Iteration: 1, Attempt: 1, Duration: time.Second}, "  train             1  done            1       0       1s"},
	}
	p := newProgress(io.Discard, "exp1", 2)
	for _, s := range steps {
		p.event(s.event)
		got := p.render()
		if last := got[len(got)-1]; last != s.want {
			t.Errorf("%s: last line %q, want %q", s.name, last, s.want)
		}
	}
}

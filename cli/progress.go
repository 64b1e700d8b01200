package cli

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlpipe/rlpipe/pipeline"
)

// runStages are the loop's stages in the order the display lists them.
var runStages = pipeline.SlotNames()

// progress is the live display of `rlpipe run` on a terminal: a header
// and one line per stage (iteration, state, attempts, cached calls,
// elapsed time), redrawn in place from the run's events.
type progress struct {
	mu        sync.Mutex
	w         io.Writer
	run       string
	last      int // the iteration the run stops after
	rows      map[string]*stageRow
	committed int
	commit    string
	resumed   int // iterations found committed when the run started
	notes     []string
	waiting   map[string]string // env → why its tasks wait (task.waiting), until one of them ends
	drawn     int               // lines drawn last time, to move back over
	now       func() time.Time
	pace      *pace // the progress line's figures; nil draws none
}

type stageRow struct {
	iteration int
	state     string
	attempts  int
	cached    int
	started   time.Time // of the running attempt; zero when idle
	elapsed   time.Duration
}

func newProgress(w io.Writer, run string, last int) *progress {
	p := &progress{w: w, run: run, last: last, rows: map[string]*stageRow{}, waiting: map[string]string{}, now: time.Now}
	for _, s := range runStages {
		p.rows[s] = &stageRow{state: "waiting"}
	}
	return p
}

// event updates the display from one engine event and redraws it.
func (p *progress) event(e pipeline.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.apply(e)
	p.draw()
}

func (p *progress) apply(e pipeline.Event) {
	switch e.Kind {
	case pipeline.EventCommitted:
		p.committed, p.commit = e.Iteration, e.Commit
		return
	case pipeline.EventResumed:
		p.resumed = e.Iteration - 1
		p.committed = p.resumed
		return
	case pipeline.EventMemoRerun:
		p.note(fmt.Sprintf("%s (iteration %d): a call interrupted by a crash runs again", e.Task, e.Iteration))
		return
	case pipeline.EventWaiting:
		p.waiting[e.Env] = e.Error
		return
	case pipeline.EventFinished, pipeline.EventFailed, pipeline.EventRetried, pipeline.EventCancelled:
		// A worker of the environment took one of its tasks (or the run
		// stopped waiting).
		delete(p.waiting, e.Env)
	}
	row, ok := p.rows[e.Stage]
	if !ok {
		return
	}
	// With overlap two iterations of a stage may be in flight; the line
	// follows the newest.
	if e.Iteration < row.iteration {
		return
	}
	if e.Iteration > row.iteration {
		row.iteration, row.attempts, row.elapsed, row.started = e.Iteration, 0, 0, time.Time{}
	}
	row.attempts = max(row.attempts, e.Attempt)
	switch e.Kind {
	case pipeline.EventStarted:
		row.state, row.attempts, row.started = "running", e.Attempt, e.Time
	case pipeline.EventFinished:
		row.state, row.elapsed, row.started = "done", e.Duration, time.Time{}
	case pipeline.EventCached:
		row.state, row.started = "cached", time.Time{}
		row.cached++
	case pipeline.EventRetried:
		row.state, row.elapsed, row.started = "retrying", e.Duration, time.Time{}
	case pipeline.EventCancelled:
		row.state, row.started = "cancelled", time.Time{}
	case pipeline.EventFailed:
		row.state, row.started = "failed", time.Time{}
		p.note(fmt.Sprintf("%s (iteration %d) failed: %s", e.Task, e.Iteration, e.Error))
	}
}

func (p *progress) note(s string) {
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	p.notes = append(p.notes, s)
	if len(p.notes) > 3 {
		p.notes = p.notes[len(p.notes)-3:]
	}
}

// tick redraws the elapsed times of running stages.
func (p *progress) tick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw()
}

// render returns the display's lines.
func (p *progress) render() []string {
	head := fmt.Sprintf("run %s: iteration %d of %d committed", p.run, p.committed, p.last)
	if p.commit != "" {
		head += " (" + shortID(p.commit) + ")"
	}
	if p.resumed > 0 {
		head += fmt.Sprintf(", resumed after %d", p.resumed)
	}
	var lines []string
	if p.pace != nil {
		lines = append(lines, p.pace.figures(p.now()).line())
	}
	t := newTable("STAGE", "ITERATION", "STATE", "ATTEMPTS", "CACHED", "ELAPSED").alignRight(1, 3, 4, 5)
	for _, s := range runStages {
		r := p.rows[s]
		it, el := "-", "-"
		if r.iteration > 0 {
			it = strconv.Itoa(r.iteration)
		}
		d := r.elapsed
		if !r.started.IsZero() {
			d = p.now().Sub(r.started)
		}
		if d > 0 {
			el = d.Round(100 * time.Millisecond).String()
		}
		t.add(s, it, r.state, strconv.Itoa(r.attempts), strconv.Itoa(r.cached), el)
	}
	var b strings.Builder
	_ = t.write(&b)
	lines = append(append([]string{head}, lines...), strings.Split(strings.TrimRight(b.String(), "\n"), "\n")...)
	for i := 1; i < len(lines); i++ {
		lines[i] = "  " + lines[i]
	}
	envs := make([]string, 0, len(p.waiting))
	for env := range p.waiting {
		envs = append(envs, env)
	}
	sort.Strings(envs)
	for _, env := range envs {
		lines = append(lines, "  ! waiting: "+p.waiting[env])
	}
	for _, n := range p.notes {
		lines = append(lines, "  ! "+n)
	}
	return lines
}

// draw moves the cursor back over the last drawing and writes the
// display again, clearing what is below it.
func (p *progress) draw() {
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dF", p.drawn)
	}
	b.WriteString("\x1b[J")
	lines := p.render()
	for _, l := range lines {
		b.WriteString(l)
		b.WriteString("\x1b[K\n")
	}
	p.drawn = len(lines)
	_, _ = io.WriteString(p.w, b.String())
}

// println writes s above the display: the display is erased, s written,
// and the display drawn again below it.
func (p *progress) println(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dF", p.drawn)
	}
	b.WriteString("\x1b[J")
	b.WriteString(s)
	b.WriteString("\n")
	p.drawn = 0
	_, _ = io.WriteString(p.w, b.String())
	p.draw()
}

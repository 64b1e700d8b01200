package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
)

// EventKind names what happened.
type EventKind string

// Event kinds.
const (
	EventStarted      EventKind = "task.started"
	EventFinished     EventKind = "task.finished"
	EventRetried      EventKind = "task.retried"
	EventCached       EventKind = "task.cached"
	EventFailed       EventKind = "task.failed"
	EventCancelled    EventKind = "task.cancelled" // its context ended first: Ctrl-C, or a failed task (Error) stopped the loop
	EventMemoRecorded EventKind = "memo.recorded"
	EventMemoReplayed EventKind = "memo.replayed"
	EventMemoRerun    EventKind = "memo.rerun_after_crash"
	EventCommitted    EventKind = "iteration.committed"
	EventResumed      EventKind = "run.resumed"
	// EventWaiting: the task waits for a worker of its environment (an
	// executor of workers, such as Temporal's, found none serving it);
	// Error says which command serves it.
	EventWaiting EventKind = "task.waiting"
)

// Event is one entry of a run's structured event stream.
type Event struct {
	Time      time.Time     `json:"time"`
	Kind      EventKind     `json:"kind"`
	Run       string        `json:"run"`
	Group     string        `json:"group,omitempty"`
	Stage     string        `json:"stage,omitempty"`
	Iteration int           `json:"iteration,omitempty"`
	Task      string        `json:"task,omitempty"`
	Env       string        `json:"env,omitempty"`
	Attempt   int           `json:"attempt,omitempty"`
	Duration  time.Duration `json:"duration_ns,omitempty"`
	Resources *Resources    `json:"resources,omitempty"`
	Key       string        `json:"key,omitempty"`
	Error     string        `json:"error,omitempty"`
	Commit    string        `json:"commit,omitempty"`
	// Worker names the process that ran the attempt (host/pid), for
	// executors whose attempts run in other processes.
	Worker string `json:"worker,omitempty"`
}

// eventLog fans events out to zerolog, to subscribers (a progress
// display), and to the store: events/NNNNNN.jsonl on the run branch per
// iteration, rewritten as the iteration progresses.
type eventLog struct {
	run   string
	log   zerolog.Logger
	mu    sync.Mutex
	byIt  map[int][]Event
	subs  []func(Event)
	clock func() time.Time
}

func newEventLog(run string, log zerolog.Logger) *eventLog {
	return &eventLog{run: run, log: log, byIt: map[int][]Event{}, clock: time.Now}
}

func (l *eventLog) subscribe(f func(Event)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.subs = append(l.subs, f)
}

func (l *eventLog) emit(e Event) {
	if l == nil {
		return
	}
	e.Time = l.clock().UTC()
	e.Run = l.run
	l.mu.Lock()
	l.byIt[e.Iteration] = append(l.byIt[e.Iteration], e)
	subs := l.subs
	l.mu.Unlock()
	ev := l.log.Info()
	if e.Kind == EventFailed || e.Kind == EventRetried || e.Kind == EventMemoRerun || e.Kind == EventWaiting {
		ev = l.log.Warn()
	}
	ev = ev.Str("event", string(e.Kind)).Str("run", e.Run).Int("iteration", e.Iteration)
	if e.Task != "" {
		ev = ev.Str("task", e.Task)
	}
	if e.Env != "" {
		ev = ev.Str("env", e.Env)
	}
	if e.Attempt > 0 {
		ev = ev.Int("attempt", e.Attempt)
	}
	if e.Duration > 0 {
		ev = ev.Dur("duration", e.Duration)
	}
	if e.Commit != "" {
		ev = ev.Str("commit", e.Commit)
	}
	if e.Worker != "" {
		ev = ev.Str("worker", e.Worker)
	}
	if e.Error != "" {
		ev = ev.Str("error", e.Error)
	}
	ev.Msg(string(e.Kind))
	for _, f := range subs {
		f(e)
	}
}

// flush writes an iteration's events to the run branch.
func (l *eventLog) flush(ctx context.Context, st artifacts.Store, branch string, iteration int) error {
	l.mu.Lock()
	evs := append([]Event(nil), l.byIt[iteration]...)
	l.mu.Unlock()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, e := range evs {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	_, err := st.PutObject(ctx, branch, runs.EventsPath(iteration), &buf, &artifacts.PutOptions{ContentType: "application/x-ndjson"})
	return err
}

// ParseEventLog reads an iteration's committed event log (JSON lines, as
// flush writes it): its events with a time, in the log's order, and their
// span, the earliest and the latest time (zero without events). A line
// that is not an event, or longer than 8 MiB, is passed over: the log is
// for people and views, and a torn line must not hide the rest.
func ParseEventLog(raw []byte) (evs []Event, t0, t1 time.Time) {
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	for sc.Scan() {
		var e Event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Time.IsZero() {
			continue
		}
		if len(evs) == 0 || e.Time.Before(t0) {
			t0 = e.Time
		}
		if len(evs) == 0 || e.Time.After(t1) {
			t1 = e.Time
		}
		evs = append(evs, e)
	}
	return evs, t0, t1
}

// forget drops an iteration's events once they are committed.
func (l *eventLog) forget(iteration int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.byIt, iteration)
}

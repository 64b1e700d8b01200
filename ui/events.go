package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
)

// keepAlive is how often an idle event stream sends a comment, so that
// proxies and browsers do not drop it.
const keepAlive = 15 * time.Second

// HeadEvent is the data of a "head" event on /api/events: the run's
// branch moved (or, first, where it is).
type HeadEvent struct {
	Run       string    `json:"run"`
	Branch    string    `json:"branch"`
	Commit    string    `json:"commit"`
	Iteration int       `json:"iteration"` // of the head commit; 0 if it is not an iteration
	Date      time.Time `json:"date"`
	// Live is true while a driver holds the run (its lock is held by a
	// process that is alive): the branch may move any moment. A finished,
	// stopped or crashed run is not live, though the stream still follows
	// its branch.
	Live bool `json:"live"`
}

// apiEvents streams Server-Sent Events for ?run=NAME: a "head" event at
// once, then one each time the run's branch moves or a driver takes or
// lets go of the run, found by looking at the branch and the run's lock
// every Options.PollInterval. A branch that disappears gives
// a "gone" event and ends the stream. Browsers reconnect by themselves
// (EventSource); the first event tells a reconnected page where the run is.
func (s *Server) apiEvents(w http.ResponseWriter, r *http.Request) {
	run := r.URL.Query().Get("run")
	if run == "" {
		fail(w, r, badRequest("missing run: add ?run=NAME"))
		return
	}
	ctx := r.Context()
	branch, b, err := s.runHead(ctx, run, false)
	if err != nil {
		fail(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	seq := 0
	send := func(event string, v any) bool {
		data, err := json.Marshal(v)
		if err != nil { // the stream has begun: log it and end the stream
			s.log.Error().Str(logRun, run).Err(err).Msgf("encode the %s event", event)
			return false
		}
		seq++
		if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", seq, event, data); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	live := func() bool {
		l, err := readLock(ctx, s.st, run)
		if err != nil && ctx.Err() == nil {
			s.log.Warn().Str(logRun, run).Err(err).Msg("read the run's lock")
		}
		return l != nil && l.Alive
	}
	head := func(b artifacts.Branch, live bool) bool {
		ev := HeadEvent{Run: run, Branch: branch, Commit: b.CommitID, Live: live}
		if c, err := s.st.GetCommit(ctx, b.CommitID); err == nil {
			ev.Date = c.CreationDate.UTC()
			ev.Iteration, _ = runs.IterationOf(c, run)
		}
		return send("head", ev)
	}
	wasLive := live()
	if !head(b, wasLive) {
		return
	}
	last := b.CommitID
	poll := time.NewTicker(s.opts.PollInterval)
	defer poll.Stop()
	idle := time.NewTicker(keepAlive)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		case <-idle.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-poll.C:
			b, err := s.st.GetBranch(ctx, branch)
			if errors.Is(err, artifacts.ErrNotFound) {
				send("gone", map[string]string{"run": run, "branch": branch})
				return
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Warn().Str(logRun, run).Err(err).Msg("poll run branch")
				continue // a busy store; try again on the next tick
			}
			if now := live(); b.CommitID != last || now != wasLive {
				last, wasLive = b.CommitID, now
				if !head(b, now) {
					return
				}
			}
		}
	}
}

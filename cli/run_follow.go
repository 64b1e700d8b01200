package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/driver"
)

// followEvery is how often a waiting `rlpipe run --executor temporal`
// reads the run branch's head while another process drives the loop.
const followEvery = 500 * time.Millisecond

// follower shows, in a `rlpipe run --executor temporal` that waits for
// its run workflow, the iterations another process's driver commits (a
// standby `rlpipe worker --driver`, or any driver after this one
// detached): it reads the run branch from the store, which every process
// reaches, and prints each new iteration's lines and the progress figures
// as the driving process does. While this process's own driver runs the
// loop, its display shows them and the follower stays quiet; shown is
// the last iteration either printed, so none is printed twice.
type follower struct {
	st      artifacts.Store
	run     string
	display runDisplay
	p       printer
	meter   *pace

	mu      sync.Mutex
	shown   int // the last iteration shown
	head    string
	driving bool // this process's driver runs the loop
}

// newFollower starts following run from its last committed iteration
// (those before are not shown again).
func newFollower(ctx context.Context, st artifacts.Store, cfg *config.Config, run string, d runDisplay, p printer) (*follower, error) {
	f := &follower{st: st, run: run, display: d, p: p, meter: newPace(cfg.Iterations, time.Now())}
	head, its, err := f.read(ctx, 0)
	if err != nil {
		return nil, err
	}
	f.head = head
	if len(its) > 0 {
		f.shown = its[len(its)-1].Iteration
	}
	f.meter.event(pipeline.Event{Kind: pipeline.EventResumed, Iteration: f.shown + 1})
	return f, nil
}

// read returns the run branch's head ("" when the branch does not exist
// yet) and its iteration commits after iteration after, oldest first.
func (f *follower) read(ctx context.Context, after int) (string, []runs.Commit, error) {
	b, err := f.st.GetBranch(ctx, runs.Branch(f.run))
	if err != nil {
		if errors.Is(err, artifacts.ErrBranchNotFound) {
			return "", nil, nil
		}
		return "", nil, fmt.Errorf("follow run %s: read branch %s: %w", f.run, runs.Branch(f.run), err)
	}
	var its []runs.Commit
	for c, err := range runs.History(ctx, f.st, f.run, b.CommitID) {
		if err != nil {
			return "", nil, fmt.Errorf("follow run %s: %w", f.run, err)
		}
		if c.Iteration <= after {
			break
		}
		its = append(its, c)
	}
	slices.Reverse(its)
	return b.CommitID, its, nil
}

// wrap is run (a driver worker's loop runner) marking while this
// process drives the loop of f's run, and the iterations it shows.
func (f *follower) wrap(run func(context.Context, artifacts.Store, *config.Config, driver.Options) (driver.Summary, error)) func(context.Context, artifacts.Store, *config.Config, driver.Options) (driver.Summary, error) {
	return func(ctx context.Context, st artifacts.Store, cfg *config.Config, o driver.Options) (driver.Summary, error) {
		if o.Name != f.run {
			return run(ctx, st, cfg, o)
		}
		// What another driver committed before this one took the loop.
		f.catchUp(ctx)
		f.mu.Lock()
		f.driving = true
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.driving = false
			f.mu.Unlock()
		}()
		onCommit := o.OnCommit
		o.OnCommit = func(ctx context.Context, branch string, n int) {
			f.mu.Lock()
			f.shown = max(f.shown, n)
			f.mu.Unlock()
			if onCommit != nil {
				onCommit(ctx, branch, n)
			}
		}
		return run(ctx, st, cfg, o)
	}
}

// follow shows new iterations every followEvery until ctx ends.
func (f *follower) follow(ctx context.Context) {
	t := time.NewTicker(followEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.catchUp(ctx)
		}
	}
}

// catchUp shows the iterations committed since the last it or the
// driver showed, unless this process drives the loop. A store it cannot
// read is a debug line: the next poll tries again, and the run's result
// does not depend on it.
func (f *follower) catchUp(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.driving {
		return
	}
	head, its, err := f.read(ctx, f.shown)
	if err != nil {
		f.display.logger.Debug().Err(err).Str("run", f.run).Msg("could not follow the run")
		return
	}
	if head == f.head && len(its) == 0 {
		return
	}
	f.head = head
	for _, c := range its {
		now := time.Now()
		f.meter.event(pipeline.Event{Kind: pipeline.EventCommitted, Iteration: c.Iteration, Time: now})
		f.meter.volume(iterationVolume(ctx, f.st, c.ID, c.Iteration))
		fig := f.meter.figures(now)
		lines := iterationReport(ctx, f.st, c.ID, c.Iteration)
		if f.display.terminal {
			// No live display here (the stages run in another process):
			// the iteration's lines and the progress line, as plain lines.
			for _, l := range append(lines, fig.line()) {
				fmt.Fprintln(f.display.stderr, l)
			}
		} else {
			fig.log(f.display.engineLogger(), f.run)
			if !f.p.json {
				for _, l := range lines {
					_ = f.p.Printf("%s\n", l)
				}
			}
		}
		f.shown = c.Iteration
	}
}

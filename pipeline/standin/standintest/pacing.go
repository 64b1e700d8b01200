package standintest

import (
	"context"
	"sync"

	"github.com/rlpipe/rlpipe/pipeline"
)

// Pacing holds an overlapped loop (max_staleness 1) to one order of its
// writes and commits, so that a test sees the same order every time.
// Ahead: iteration N trains only once iteration N+1's generation has
// started, so N+1's prompts and trajectories are staged before N commits.
// Behind: iteration N+1 samples only once N has committed, so nothing of
// N+1 is written before N's commit. Pass Event as the run's OnEvent and
// run the stages Stages returns.
type Pacing struct {
	ahead bool
	last  int

	mu      sync.Mutex
	started map[int]chan struct{} // closed when iteration N's generation started
	commits map[int]chan struct{} // closed when iteration N committed
}

// NewPacing paces a loop of iterations iterations, ahead or behind.
func NewPacing(ahead bool, iterations int) *Pacing {
	return &Pacing{ahead: ahead, last: iterations, started: map[int]chan struct{}{}, commits: map[int]chan struct{}{}}
}

// ch is the channel of iteration n in m, made on first use.
func (p *Pacing) ch(m map[int]chan struct{}, n int) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := m[n]
	if !ok {
		c = make(chan struct{})
		m[n] = c
	}
	return c
}

// Event is the run's OnEvent: it releases the tasks that wait, each once.
func (p *Pacing) Event(e pipeline.Event) {
	var c chan struct{}
	switch {
	case e.Kind == pipeline.EventStarted && e.Stage == pipeline.SlotGenerate:
		c = p.ch(p.started, e.Iteration)
	case e.Kind == pipeline.EventCommitted:
		c = p.ch(p.commits, e.Iteration)
	default:
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-c:
	default:
		close(c)
	}
}

// Stages are s with its train (ahead) or its sample (behind) held to the
// pacing; s is not changed.
func (p *Pacing) Stages(s pipeline.Stages) pipeline.Stages {
	held := func(t *pipeline.Task, wait func(n int) chan struct{}) *pipeline.Task {
		c := *t
		inner := t.Run
		c.Run = func(ctx context.Context, tc *pipeline.TaskContext) error {
			if w := wait(tc.Iteration); w != nil {
				select {
				case <-w:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return inner(ctx, tc)
		}
		return &c
	}
	if p.ahead {
		s.Train = held(s.Train, func(n int) chan struct{} {
			if n >= p.last {
				return nil
			}
			return p.ch(p.started, n+1)
		})
		return s
	}
	s.Sample = held(s.Sample, func(n int) chan struct{} {
		if n <= 1 {
			return nil
		}
		return p.ch(p.commits, n-1)
	})
	return s
}

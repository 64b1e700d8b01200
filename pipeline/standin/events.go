package standin

import (
	"sync"

	"github.com/rlpipe/rlpipe/pipeline"
)

// Events keeps a run's events for a test to read: pass its Add as
// pipeline.RunOptions.OnEvent (the engine calls it from its goroutines).
type Events struct {
	mu  sync.Mutex
	evs []pipeline.Event
}

// Add records e.
func (r *Events) Add(e pipeline.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
}

// All are the events recorded so far, in the order they came.
func (r *Events) All() []pipeline.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]pipeline.Event(nil), r.evs...)
}

package cli

import (
	"sync"

	"github.com/rlpipe/rlpipe/pipeline"
)

// runStats counts the task calls of `rlpipe eval` from the engine's
// events (a run's counts are driver.Summary's).
type runStats struct {
	mu            sync.Mutex
	tasks, cached int // calls that finished or were cached; of which cache hits
}

func (s *runStats) event(e pipeline.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e.Kind {
	case pipeline.EventFinished:
		s.tasks++
	case pipeline.EventCached:
		s.tasks++
		s.cached++
	}
}

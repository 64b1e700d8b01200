// Package heappeak measures the Go heap while a phase of work runs, for
// the benchmarks that report peak memory and the tests that bound it.
//
// A Sampler starts from the live heap after a collection (its base) and
// keeps the largest live heap it sees: the heap the last collection
// marked (runtime/metrics' /gc/heap/live:bytes), sampled every few
// milliseconds by a goroutine and at every call of Sample. Garbage the
// collector has yet to reach is not counted, so the figure is what the
// code holds, not the collector's slack (which grows with the heap a
// program already has); objects allocated while a collection marks count
// as live, so under heavy allocation it reads high. StartCollecting
// samples by collecting first (Live): exact at each sample, and slow, for
// a pass that is measured and not timed. Both are for reports (a
// benchmark's peak_MB); a test that bounds memory calls Live at points of
// its own choosing: the same number on every run, whatever the timing.
package heappeak

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Sampler follows the heap of one phase. Start it, Stop it once.
type Sampler struct {
	read func() uint64
	base uint64
	peak atomic.Uint64
	stop chan struct{}
	wg   sync.WaitGroup
}

// Start collects garbage, records the live heap as the base and starts
// sampling the last collection's live heap every 5 ms.
func Start() *Sampler { return start(5*time.Millisecond, live) }

// StartCollecting is Start sampling every by collecting garbage first.
func StartCollecting(every time.Duration) *Sampler { return start(every, Live) }

func start(every time.Duration, read func() uint64) *Sampler {
	s := &Sampler{read: read, stop: make(chan struct{}), base: Live()}
	s.peak.Store(s.base)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.Sample()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Sample reads the live heap and keeps it if it is the largest yet.
func (s *Sampler) Sample() {
	v := s.read()
	for {
		p := s.peak.Load()
		if v <= p || s.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

const liveMetric = "/gc/heap/live:bytes"

// live is the heap the last collection marked live.
func live() uint64 {
	m := []metrics.Sample{{Name: liveMetric}}
	metrics.Read(m)
	return m[0].Value.Uint64()
}

// Base is the live heap when the sampler started.
func (s *Sampler) Base() uint64 { return s.base }

// Stop ends sampling and returns the largest live heap seen, base
// included.
func (s *Sampler) Stop() uint64 {
	close(s.stop)
	s.wg.Wait()
	s.Sample()
	return s.peak.Load()
}

// Live collects garbage and returns the heap that is left: what the
// program holds now.
func Live() uint64 {
	runtime.GC()
	return live()
}

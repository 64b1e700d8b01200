package trackers

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
)

// FeedOptions tune a Feed. Nil means the defaults.
type FeedOptions struct {
	// Queue is how many iterations wait for each tracker (default 64);
	// an iteration that finds its tracker's queue full is not sent to it.
	Queue int
	// Attempts is how many times a Start or a Log is tried (default 5).
	Attempts int
	// Backoff is the wait after the first failure (default 1s); it
	// doubles after each, up to 30s.
	Backoff time.Duration
	// CallTimeout bounds one Start or Log (default 30s).
	CallTimeout time.Duration
	// Flush bounds how long Close waits for the queues to drain (default
	// 10s); what is left is dropped. Once Close is called, a failed call
	// is not retried. Each tracker's End comes after, bounded by Flush
	// and CallTimeout, whether or not its queue drained: Close takes at
	// most twice Flush.
	Flush time.Duration
	// Logger receives the warnings: a tracker that fails or falls behind.
	Logger zerolog.Logger
}

func (o *FeedOptions) withDefaults() FeedOptions {
	var v FeedOptions
	if o != nil {
		v = *o
	}
	if v.Queue <= 0 {
		v.Queue = 64
	}
	if v.Attempts <= 0 {
		v.Attempts = 5
	}
	if v.Backoff <= 0 {
		v.Backoff = time.Second
	}
	if v.CallTimeout <= 0 {
		v.CallTimeout = 30 * time.Second
	}
	if v.Flush <= 0 {
		v.Flush = 10 * time.Second
	}
	return v
}

// maxBackoff caps the wait between attempts.
const maxBackoff = 30 * time.Second

// Log field names.
const (
	fieldRun     = "run"
	fieldTracker = "tracker"
	fieldIter    = "iteration"
)

// Named is a tracker and the name warnings give it ("tensorboard:tb").
type Named struct {
	Name    string
	Tracker Tracker
}

// A Feed sends a running loop's committed iterations to its trackers
// without ever making the loop wait: Committed only queues the commit. A
// goroutine of the feed reads each commit's points from the store
// (Iteration), and one goroutine per tracker sends them, retrying with
// backoff; a tracker that is down or slow loses points (with a warning
// naming the back-fill command), never time of the loop. The feed owns
// its goroutines: Close waits for them.
type Feed struct {
	st      artifacts.Store
	run     Run
	o       FeedOptions
	log     zerolog.Logger
	jobs    chan job
	sinks   []*sink
	cancel  context.CancelFunc
	closing chan struct{} // closed by Close: no more retries
	done    sync.WaitGroup
	mu      sync.Mutex
	dropped bool // a commit found the feed's own queue full
	closed  bool
	outcome Outcome // what the trackers' End records; set by Close
}

// job is a committed iteration to read.
type job struct {
	iteration int
	commit    string
}

// sink is one tracker's queue and counts.
type sink struct {
	Named
	q         chan []Point
	started   bool
	ended     bool // End recorded the outcome of a started tracker
	delivered int  // points the tracker took
	lost      int  // points dropped: queue full, attempts exhausted, or Close
	warned    bool
}

// Delivery is what a tracker got of a run, as Close reports it.
type Delivery struct {
	Name string
	// Delivered and Lost count points; lost ones are back-filled by
	// `rlpipe track`.
	Delivered, Lost int
	// Ended says the tracker started and recorded how the run ended;
	// `rlpipe track` ends a run that a tracker did not.
	Ended bool
}

// NewFeed starts a feed of run's iterations, read from st, to trackers.
// Its goroutines outlive ctx's cancellation until Close (so that Close can
// still flush), and take ctx's values.
func NewFeed(ctx context.Context, st artifacts.Store, run Run, trackers []Named, o *FeedOptions) *Feed {
	opts := o.withDefaults()
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f := &Feed{st: st, run: run, o: opts, log: opts.Logger.With().Str(fieldRun, run.Name).Logger(),
		jobs: make(chan job, opts.Queue), cancel: cancel, closing: make(chan struct{})}
	for _, t := range trackers {
		s := &sink{Named: t, q: make(chan []Point, opts.Queue)}
		f.sinks = append(f.sinks, s)
		f.done.Add(1)
		go func() {
			defer f.done.Done()
			f.send(fctx, s)
		}()
	}
	f.done.Add(1)
	go func() {
		defer f.done.Done()
		f.collect(fctx)
	}()
	return f
}

// Committed queues the points of iteration n, committed as commit (an
// id), for every tracker. It never blocks: when the feed is that far
// behind, the iteration is dropped with a warning.
func (f *Feed) Committed(n int, commit string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	select {
	case f.jobs <- job{n, commit}:
	default:
		if !f.dropped {
			f.dropped = true
			f.log.Warn().Int(fieldIter, n).Msg("trackers: too far behind, dropping iterations; back-fill them with rlpipe track after the run")
		}
	}
}

// collect reads each queued commit's points and hands them to every
// tracker's queue.
func (f *Feed) collect(ctx context.Context) {
	defer func() {
		for _, s := range f.sinks {
			close(s.q)
		}
	}()
	for j := range f.jobs {
		var points []Point
		c, err := f.st.GetCommit(ctx, j.commit)
		if err == nil {
			points, err = Iteration(ctx, f.st, runs.Commit{Commit: c, Iteration: j.iteration})
		}
		if err != nil {
			if ctx.Err() == nil {
				f.log.Warn().Err(err).Int(fieldIter, j.iteration).Msg("trackers: cannot read the iteration's figures; they are not sent")
			}
			continue
		}
		for _, s := range f.sinks {
			select {
			case s.q <- points:
			default:
				f.lose(s, len(points), "its queue is full")
			}
		}
	}
}

// send delivers a tracker's queue, starting the tracker first, and ends
// it with the outcome Close names.
func (f *Feed) send(ctx context.Context, s *sink) {
	defer f.end(ctx, s)
	f.start(ctx, s)
	for points := range s.q {
		if ctx.Err() != nil {
			f.lose(s, len(points), "the run ended before it was sent")
			continue
		}
		if !f.start(ctx, s) {
			f.lose(s, len(points), "the tracker did not start")
			continue
		}
		err := f.retry(ctx, func(ctx context.Context) error { return s.Tracker.Log(ctx, points) })
		if err != nil {
			s.started = false // Start again before the next Log: the tracker may have lost its place
			f.lose(s, len(points), err.Error())
			continue
		}
		f.mu.Lock()
		s.delivered += len(points)
		f.mu.Unlock()
		f.keep(ctx, s, points)
	}
}

// keep hands s the checkpoints points evaluated, when it keeps them
// (CheckpointKeeper), retrying as a Log is retried (a tracker whose call
// failed is started again first); one it cannot keep is named in a
// warning.
func (f *Feed) keep(ctx context.Context, s *sink, points []Point) {
	k := keeper(s.Tracker)
	if k == nil {
		return
	}
	for _, c := range checkpoints(points) {
		err := f.retry(ctx, func(ctx context.Context) error {
			if !s.started {
				if err := s.Tracker.Start(ctx, f.run); err != nil {
					return err
				}
				s.started = true
			}
			err := keepCheckpoint(ctx, f.st, k, c)
			if err != nil {
				s.started = false // Start again before the next call, as after a failed Log
			}
			return err
		})
		if err != nil && ctx.Err() == nil {
			f.log.Warn().Err(err).Str(fieldTracker, s.Name).Int(fieldIter, c.Iteration).
				Msg("trackers: cannot keep the checkpoint in the tracker; rlpipe track RUN --to KIND:TARGET keeps it afterwards")
		}
	}
}

// end records the run's outcome in s, once, bounded by CallTimeout and
// Flush: after its queue is done, even when Close gave up on the queue
// (ctx is then cancelled, the outcome still worth sending).
func (f *Feed) end(ctx context.Context, s *sink) {
	f.mu.Lock()
	o := f.outcome
	f.mu.Unlock()
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(f.o.CallTimeout, f.o.Flush))
	defer cancel()
	err := s.Tracker.End(ectx, o)
	if err != nil {
		f.log.Warn().Err(err).Str(fieldTracker, s.Name).Stringer("outcome", o.Status).Msg("trackers: cannot end the tracker's run")
	}
	f.mu.Lock()
	s.ended = err == nil && s.started
	f.mu.Unlock()
}

// start starts s unless it is started; false when it could not be.
func (f *Feed) start(ctx context.Context, s *sink) bool {
	if s.started {
		return true
	}
	err := f.retry(ctx, func(ctx context.Context) error { return s.Tracker.Start(ctx, f.run) })
	if err != nil {
		if ctx.Err() == nil {
			f.log.Warn().Err(err).Str(fieldTracker, s.Name).Msg("trackers: cannot start the tracker; the run goes on without it")
		}
		return false
	}
	s.started = true
	return true
}

// retry calls fn up to Attempts times, each bounded by CallTimeout,
// waiting with exponential backoff between them; once the feed is
// closing, a failure is final.
func (f *Feed) retry(ctx context.Context, fn func(context.Context) error) error {
	wait := f.o.Backoff
	var err error
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, f.o.CallTimeout)
		err = fn(cctx)
		cancel()
		if err == nil || attempt >= f.o.Attempts || ctx.Err() != nil {
			return err
		}
		f.log.Debug().Err(err).Int("attempt", attempt).Msg("trackers: retrying")
		select {
		case <-ctx.Done():
			return err
		case <-f.closing:
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, maxBackoff)
	}
}

// lose counts points a tracker will not get, and warns once per tracker.
func (f *Feed) lose(s *sink, n int, why string) {
	f.mu.Lock()
	s.lost += n
	warn := !s.warned
	s.warned = true
	f.mu.Unlock()
	if warn {
		f.log.Warn().Str(fieldTracker, s.Name).Str("reason", why).
			Msg("trackers: points not sent; the run goes on, and rlpipe track RUN --to KIND:TARGET back-fills the tracker afterwards")
	}
}

// Close stops taking commits, waits up to FeedOptions.Flush for the
// trackers to take what is queued, then abandons the rest, ends each
// tracker with o (Tracker.End; a zero Time is now), and reports what each
// tracker got. Only the first Close of a feed names the outcome.
func (f *Feed) Close(o Outcome) []Delivery {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		if o.Time.IsZero() {
			o.Time = time.Now()
		}
		f.outcome = o
		close(f.jobs)
		close(f.closing)
	}
	f.mu.Unlock()
	finished := make(chan struct{})
	go func() {
		f.done.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(f.o.Flush):
		f.cancel() // interrupt calls and backoffs; what is queued is lost
		<-finished
	}
	f.cancel()
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Delivery, len(f.sinks))
	for i, s := range f.sinks {
		out[i] = Delivery{Name: s.Name, Delivered: s.delivered, Lost: s.lost, Ended: s.ended}
	}
	return out
}

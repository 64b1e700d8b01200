package cli

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline"
)

// pace measures how fast a run goes in this process: the iterations it
// committed since it started, and the samples and completion tokens they
// trained on, for the progress line and its JSON events. It is fed from
// the engine's goroutines.
type pace struct {
	mu      sync.Mutex
	last    int       // the iteration the run stops after
	start   time.Time // when this process started the run
	base    int       // iterations committed before it started
	done    int       // the last committed iteration
	at      time.Time // when this process last committed one
	samples float64
	tokens  float64
	// tokensKnown: every iteration counted reported its response length.
	tokensKnown bool
}

func newPace(last int, start time.Time) *pace {
	return &pace{last: last, start: start, tokensKnown: true}
}

// event follows the run's resumption and commits.
func (p *pace) event(e pipeline.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.Kind {
	case pipeline.EventResumed:
		p.base = e.Iteration - 1
		p.done = max(p.done, p.base)
	case pipeline.EventCommitted:
		p.done = max(p.done, e.Iteration)
		p.at = e.Time
	}
}

// volume adds a committed iteration's samples and completion tokens;
// tokens < 0 is not reported.
func (p *pace) volume(samples, tokens float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples += samples
	if tokens < 0 {
		p.tokensKnown = false
	} else {
		p.tokens += tokens
	}
}

// paceFigures are a run's progress at a moment. ETA, SamplesPerS and
// TokensPerS are nil until known.
type paceFigures struct {
	Iteration, Iterations int
	Elapsed               time.Duration
	ETA                   *time.Duration
	SamplesPerS           *float64
	TokensPerS            *float64
}

// figures are the progress at now. The rates are over the iterations
// this process committed (their samples over the time until the last
// one landed); the ETA is the mean time of those iterations times the
// iterations left, less the time since the last one landed.
func (p *pace) figures(now time.Time) paceFigures {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := paceFigures{Iteration: p.done, Iterations: p.last, Elapsed: max(now.Sub(p.start), 0)}
	newIts := p.done - p.base
	took := p.at.Sub(p.start)
	if newIts <= 0 || p.at.IsZero() || took <= 0 {
		return f
	}
	eta := max(took/time.Duration(newIts)*time.Duration(max(p.last-p.done, 0))-now.Sub(p.at), 0)
	f.ETA = &eta
	if p.samples > 0 {
		s := p.samples / took.Seconds()
		f.SamplesPerS = &s
		if p.tokensKnown && p.tokens > 0 {
			t := p.tokens / took.Seconds()
			f.TokensPerS = &t
		}
	}
	return f
}

// line is the progress line: a bar, iteration k/N, elapsed, ETA,
// samples/s and tokens/s ("-" while unknown).
func (f paceFigures) line() string {
	const width = 20
	filled := 0
	if f.Iterations > 0 {
		filled = min(f.Iteration*width/f.Iterations, width)
	}
	eta, sps, tps := "-", "-", "-"
	if f.ETA != nil {
		eta = roundDuration(*f.ETA).String()
	}
	if f.SamplesPerS != nil {
		sps = fmt.Sprintf("%.1f", *f.SamplesPerS)
	}
	if f.TokensPerS != nil {
		tps = fmt.Sprintf("%.0f", *f.TokensPerS)
	}
	return fmt.Sprintf("[%s%s] iteration %d/%d  elapsed %s  ETA %s  %s samples/s  %s tokens/s",
		strings.Repeat("#", filled), strings.Repeat("-", width-filled), f.Iteration, f.Iterations,
		roundDuration(f.Elapsed), eta, sps, tps)
}

// log writes the figures as a run.progress event of run.
func (f paceFigures) log(log zerolog.Logger, run string) {
	ev := log.Info().Str("event", "run.progress").Str("run", run).Int("iteration", f.Iteration).
		Int("iterations", f.Iterations).Float64("elapsed_s", f.Elapsed.Round(time.Millisecond).Seconds())
	if f.ETA != nil {
		ev = ev.Float64("eta_s", f.ETA.Round(time.Millisecond).Seconds())
	}
	if f.SamplesPerS != nil {
		ev = ev.Float64("samples_per_s", *f.SamplesPerS)
	}
	if f.TokensPerS != nil {
		ev = ev.Float64("tokens_per_s", *f.TokensPerS)
	}
	ev.Msg("run.progress")
}

// roundDuration is d to a tenth of a second under a minute, else to the
// second.
func roundDuration(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// iterationVolume is what iteration n trained on: its samples, and its
// completion tokens (samples × response_length_mean; -1 when the
// trainer's figures do not say), from its train metrics.
func iterationVolume(ctx context.Context, st artifacts.Store, branch string, n int) (samples, tokens float64) {
	m, err := runs.ReadTrainMetrics(ctx, st, branch, n)
	if err != nil || m == nil {
		return 0, -1
	}
	samples, _ = m.Get("samples")
	mean, ok := m.Get("response_length_mean")
	if !ok {
		return samples, -1
	}
	return samples, samples * mean
}

package episodes_test

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/arith"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/server"
	"github.com/rlpipe/rlpipe/policy/server/servertest"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// BenchmarkChainEpisodesHTTPvsInProcess plays the embedded multi-turn
// task (chain: two answers per episode) with the embedded model in
// process and through the policy server and the OpenAI client over
// loopback — one request per turn, prompt token ids included — and
// reports episodes/s of each and their ratio, measured in the same run
// on the same episodes. The shape is one iteration of the chain loop:
// 16 prompts × 8 episodes, 4 in flight.
func BenchmarkChainEpisodesHTTPvsInProcess(b *testing.B) {
	m, err := tiny.Embedded()
	if err != nil {
		b.Fatal(err)
	}
	inproc := tiny.NewPolicy(m)
	overHTTP, _ := servertest.Loopback(b, inproc, &server.Options{Model: m.Version()}, nil)
	problems := arith.Train(3, 16)
	s := policy.Sampling{Temperature: 1, MaxTokens: 5, Logprobs: true, PromptLogprobs: true}
	play := func(p policy.Policy) int {
		r, err := environments.NewRunner(p, &environments.RunnerOptions{Sampling: s, MaxTurns: 4, Seed: 9})
		if err != nil {
			b.Fatal(err)
		}
		var g errgroup.Group
		g.SetLimit(4)
		for _, pr := range problems {
			for j := range 8 {
				g.Go(func() error {
					res, err := r.Run(context.Background(), arith.NewChain(pr, nil), environments.Episode{ID: pr.ID(), SampleIndex: int32(j)})
					if err == nil && res.Trajectory.Sequence == nil {
						b.Errorf("episode %s #%d has no exact sequence: %s", pr.ID(), j, res.Unaligned)
					}
					return err
				})
			}
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		return len(problems) * 8
	}
	play(inproc) // warm both paths
	play(overHTTP)
	var tIn, tHTTP time.Duration
	episodes := 0
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		episodes += play(inproc)
		t1 := time.Now()
		play(overHTTP)
		tHTTP += time.Since(t1)
		tIn += t1.Sub(t0)
	}
	b.StopTimer()
	in, hp := float64(episodes)/tIn.Seconds(), float64(episodes)/tHTTP.Seconds()
	b.ReportMetric(in, "inprocess-episodes/s")
	b.ReportMetric(hp, "http-episodes/s")
	b.ReportMetric(hp/in, "http/inprocess")
}

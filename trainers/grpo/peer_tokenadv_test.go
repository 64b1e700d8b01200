package grpo_test

import (
	"math/rand/v2"
	"testing"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// PPO's losses take GAE's advantage per token. verl's policy losses take
// advantages per token anyway, so each loss with per-token advantages of
// both signs inside a sequence is checked against verl's function: in
// GSPO one sequence ratio then clips each token by its own advantage's
// sign (the external trainer's gspo with a critic, TestPPOParityWithEmbedded).
func TestPeerParityTokenAdvantages(t *testing.T) {
	py := pyvenv.Peer(t)
	seqs := peerSeqs()
	rng := rand.New(rand.NewPCG(36, 4))
	for i := range seqs {
		seqs[i].Advantages = make([]float64, len(seqs[i].Logprobs))
		for j := range seqs[i].Advantages {
			seqs[i].Advantages[j] = rng.NormFloat64()
		}
	}
	type tc struct {
		name string
		o    grpo.LossOptions
		peer peerLossCase
	}
	var cases []tc
	var peerCases []peerLossCase
	for _, agg := range grpo.Aggregations {
		for _, l := range verlLosses {
			name := l.loss.Name() + " per-token " + string(agg)
			c := tc{name: name, o: grpo.LossOptions{Policy: l.loss, Aggregation: agg, EpsLow: 0.2, EpsHigh: 0.28},
				peer: peerLossCase{Name: name, Fn: l.fn, Agg: verlAgg[agg], EpsLow: 0.2, EpsHigh: 0.28, ClipC: 1e9}}
			cases = append(cases, c)
			peerCases = append(peerCases, c.peer)
		}
	}
	peer := runPeer(t, py, "peer_losses.py", lossBatch(seqs, peerCases))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var want lossGrad
			peerAnswer(t, peer, py, c.peer.Name, len(seqs), &want, &want)
			st, g, err := grpo.Loss(seqs, c.o)
			if err != nil {
				t.Fatal(err)
			}
			want.check(t, st.Loss, g)
			if st.ClipLow == 0 || st.ClipHigh == 0 {
				t.Errorf("clip fractions low %v high %v: the batch does not test both clips", st.ClipLow, st.ClipHigh)
			}
		})
	}
}

package grpo_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// behaviourSeqs is peerSeqs with behaviour logprobs: the sampler's, an
// N(0, 0.45) log ratio per token away from the recomputed anchor
// OldLogprobs plus a drift of sd 0.2 per sequence, so that token and
// sequence weights both cross the caps and every rejection statistic
// keeps some tokens and drops others.
func behaviourSeqs() []grpo.Sequence {
	seqs := peerSeqs()
	rng := rand.New(rand.NewPCG(36, 1))
	for i := range seqs {
		drift := rng.NormFloat64() * 0.2
		b := make([]float32, len(seqs[i].OldLogprobs))
		for j, o := range seqs[i].OldLogprobs {
			b[j] = o - float32(drift+rng.NormFloat64()*0.45)
		}
		seqs[i].BehaviourLogprobs = b
	}
	return seqs
}

// verlThreshold is c's rejection threshold as verl spells it: k1 bounds
// as "lower_upper".
func verlThreshold(c grpo.RolloutCorrection) any {
	if c.RS == "" {
		return nil
	}
	if strings.HasSuffix(c.RS, "_k1") {
		lower := c.RSThresholdLower
		if lower == 0 {
			lower = 1 / c.RSThreshold
		}
		return fmt.Sprintf("%v_%v", lower, c.RSThreshold)
	}
	return c.RSThreshold
}

// TestRolloutCorrectionPeerParity computes the rollout correction with
// rlpipe and with verl's own functions on the fixed-seed batch: in
// decoupled mode (behaviour logprobs beside a recomputed anchor)
// rollout_corr_helper.compute_rollout_correction_and_rejection_mask, its
// weights and mask handed to core_algos' loss; in bypass mode (the
// anchor is the behaviour policy, rlpipe's default)
// core_algos.compute_policy_loss_bypass_mode with loss_type ppo_clip,
// which masks and reports the weights without applying them, and with
// loss_type reinforce (rlpipe's Reinforce), which applies them. For each IS
// level and rejection statistic the number of tokens kept is verl's, the
// loss and every token's gradient (0 where a token was dropped) agree
// within 1e-6, and the figures equal verl's metrics within 1e-6. Every
// case rejects some tokens and keeps others, or caps some weights, and a
// decoupled IS case's loss differs from the uncorrected one, so that it
// tests something.
func TestRolloutCorrectionPeerParity(t *testing.T) {
	py := pyvenv.Peer(t)
	seqs := behaviourSeqs()
	type peerCase struct {
		Name        string  `json:"name"`
		Mode        string  `json:"mode"`
		Fn          string  `json:"fn"`
		Agg         string  `json:"agg"`
		EpsLow      float64 `json:"eps_low"`
		EpsHigh     float64 `json:"eps_high"`
		IS          any     `json:"rollout_is"`
		ISThreshold float64 `json:"rollout_is_threshold"`
		RS          any     `json:"rollout_rs"`
		RSThreshold any     `json:"rollout_rs_threshold"`
	}
	var peerCases []peerCase
	verlFn := map[string]string{"ppo_clip": "compute_policy_loss_vanilla", "gspo": "compute_policy_loss_gspo", "cispo": "compute_policy_loss_cispo"}
	type tc struct {
		name   string
		bypass bool
		loss   grpo.PolicyLoss
		agg    grpo.Aggregation
		c      grpo.RolloutCorrection
	}
	cases := []tc{
		{name: "token TIS", c: grpo.RolloutCorrection{IS: grpo.ISToken}},
		{name: "sequence TIS", c: grpo.RolloutCorrection{IS: grpo.ISSequence, ISThreshold: 1.5}},
		{name: "token TIS and token_k1", c: grpo.RolloutCorrection{IS: grpo.ISToken, ISThreshold: 1.5, RS: "token_k1", RSThreshold: 1.8, RSThresholdLower: 0.6}},
		{name: "token_k1 symmetric", c: grpo.RolloutCorrection{RS: "token_k1", RSThreshold: 2}},
		{name: "token_k2", c: grpo.RolloutCorrection{RS: "token_k2", RSThreshold: 0.2}},
		{name: "token_k3", c: grpo.RolloutCorrection{RS: "token_k3", RSThreshold: 0.2}},
		{name: "seq_sum_k1", c: grpo.RolloutCorrection{RS: "seq_sum_k1", RSThreshold: 3, RSThresholdLower: 0.4}},
		{name: "seq_sum_k2", c: grpo.RolloutCorrection{RS: "seq_sum_k2", RSThreshold: 0.8}},
		{name: "seq_sum_k3", c: grpo.RolloutCorrection{RS: "seq_sum_k3", RSThreshold: 0.8}},
		{name: "seq_mean_k1 (geometric)", c: grpo.RolloutCorrection{RS: "seq_mean_k1", RSThreshold: 1.3, RSThresholdLower: 0.8}},
		{name: "seq_mean_k2", c: grpo.RolloutCorrection{RS: "seq_mean_k2", RSThreshold: 0.1}},
		{name: "seq_mean_k3", c: grpo.RolloutCorrection{RS: "seq_mean_k3", RSThreshold: 0.1}},
		{name: "seq_max_k2", c: grpo.RolloutCorrection{RS: "seq_max_k2", RSThreshold: 0.3}},
		{name: "seq_max_k3", c: grpo.RolloutCorrection{RS: "seq_max_k3", RSThreshold: 0.3}},
		{name: "sequence TIS, seq_mean_k1, gspo, sequence mean", loss: grpo.GSPO, agg: grpo.SequenceMean,
			c: grpo.RolloutCorrection{IS: grpo.ISSequence, RS: "seq_mean_k1", RSThreshold: 1.3}},
		{name: "token TIS, token_k3, cispo, Dr. GRPO's sum", loss: grpo.CISPO, agg: grpo.SeqMeanTokenSumNorm,
			c: grpo.RolloutCorrection{IS: grpo.ISToken, RS: "token_k3", RSThreshold: 0.2}},
		{name: "bypass: token IS reported, token_k1", bypass: true, c: grpo.RolloutCorrection{IS: grpo.ISToken, RS: "token_k1", RSThreshold: 1.5}},
		{name: "bypass: sequence IS reported, seq_mean_k3, sequence mean", bypass: true, agg: grpo.SequenceMean,
			c: grpo.RolloutCorrection{IS: grpo.ISSequence, RS: "seq_mean_k3", RSThreshold: 0.05}},
		// verl's bypass_pg_is: REINFORCE, which takes the weights.
		{name: "bypass: reinforce, token TIS applied, token_k1", bypass: true, loss: grpo.Reinforce,
			c: grpo.RolloutCorrection{IS: grpo.ISToken, ISThreshold: 1.5, RS: "token_k1", RSThreshold: 1.8}},
		{name: "bypass: reinforce, sequence TIS applied, sequence mean", bypass: true, loss: grpo.Reinforce, agg: grpo.SequenceMean,
			c: grpo.RolloutCorrection{IS: grpo.ISSequence}},
		{name: "bypass: reinforce alone", bypass: true, loss: grpo.Reinforce},
	}
	for i, c := range cases {
		if c.loss == nil {
			cases[i].loss = grpo.PPOClip
		}
		if c.agg == "" {
			cases[i].agg = grpo.TokenMean
		}
		c = cases[i]
		pc := peerCase{Name: c.name, Mode: "decoupled", Fn: verlFn[c.loss.Name()], Agg: verlAgg[c.agg], EpsLow: 0.2, EpsHigh: 0.28,
			RSThreshold: verlThreshold(c.c), ISThreshold: c.c.ISThreshold}
		if pc.ISThreshold == 0 {
			pc.ISThreshold = grpo.DefaultISThreshold
		}
		if c.c.IS != "" {
			pc.IS = c.c.IS
		}
		if c.c.RS != "" {
			pc.RS = c.c.RS
		}
		if c.bypass {
			pc.Mode, pc.Fn = "bypass", c.loss.Name()
		}
		peerCases = append(peerCases, pc)
	}
	peer := runPeer(t, py, "peer_rollout_corr.py", lossBatch(seqs, peerCases))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var want struct {
				lossGrad
				Mask    [][]float64        `json:"mask"`
				Weights [][]float64        `json:"weights"`
				Metrics map[string]float64 `json:"metrics"`
			}
			peerAnswer(t, peer, py, c.name, len(seqs), &want, &want.lossGrad)
			in := seqs
			if c.bypass {
				in = make([]grpo.Sequence, len(seqs))
				for i, s := range seqs {
					s.BehaviourLogprobs = nil
					in[i] = s
				}
			}
			o := grpo.LossOptions{Policy: c.loss, Aggregation: c.agg, EpsLow: 0.2, EpsHigh: 0.28, Correction: c.c}
			st, g, err := grpo.Loss(in, o)
			if err != nil {
				t.Fatal(err)
			}
			want.check(t, st.Loss, g)
			kept, dropped := 0, 0
			for i := range g {
				for j := range g[i] {
					if in[i].Trainable != nil && !in[i].Trainable[j] {
						continue
					}
					if want.Mask[i][j] == 1 {
						kept++
					} else {
						dropped++
					}
				}
			}
			metric := func(name string) float64 {
				v, ok := want.Metrics["rollout_corr/"+name]
				if !ok {
					t.Fatalf("verl reports no rollout_corr/%s", name)
				}
				return v
			}
			near := func(what string, got *float64, w float64) {
				t.Helper()
				if got == nil {
					t.Errorf("%s: rlpipe reports none, verl %.9g", what, w)
				} else if math.Abs(*got-w) > 1e-6 {
					t.Errorf("%s: rlpipe %.9g, verl %.9g", what, *got, w)
				}
			}
			if c.c.RS != "" {
				if kept == 0 || dropped == 0 {
					t.Errorf("verl kept %d tokens and dropped %d: the case does not test the rejection", kept, dropped)
				}
				near("rollout_rs_masked_frac", st.RSMasked, metric("rollout_rs_masked_fraction"))
				near("rollout_rs_seq_masked_frac", st.RSSeqMasked, metric("rollout_rs_seq_masked_fraction"))
				if want := float64(kept) / float64(kept+dropped); math.Abs(float64(st.Tokens)/float64(st.Scored)-want) > 1e-12 {
					t.Errorf("%d of %d tokens entered the loss, verl kept %d of %d", st.Tokens, st.Scored, kept, kept+dropped)
				}
			} else if st.RSMasked != nil {
				t.Errorf("rollout_rs_masked_frac %v without rollout_rs", *st.RSMasked)
			}
			if c.c.IS != "" {
				near("rollout_is_mean", st.ISMean, metric("rollout_is_mean"))
				near("rollout_is_max", st.ISMax, metric("rollout_is_max"))
				if c.c.IS == grpo.ISToken {
					near("rollout_is_capped_frac", st.ISCapped, metric("rollout_is_ratio_fraction_high"))
				}
				if st.ISCapped == nil || *st.ISCapped == 0 {
					t.Errorf("no weight was capped: the case does not test the truncation")
				}
				if !c.bypass && want.Weights == nil {
					t.Errorf("verl computed no IS weights")
				}
				o.Correction = grpo.RolloutCorrection{}
				_, weighted := c.loss.(grpo.ISWeighted)
				if plain, _, err := grpo.Loss(in, o); err != nil || (!c.bypass || weighted) && math.Abs(plain.Loss-st.Loss) < 1e-4 {
					t.Errorf("the loss without the correction is %v (%v), with it %v: the weights do not act", plain.Loss, err, st.Loss)
				}
			} else if st.ISMean != nil {
				t.Errorf("rollout_is_mean %v without rollout_is", *st.ISMean)
			}
		})
	}
}

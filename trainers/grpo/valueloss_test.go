package grpo_test

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// valueSeqs is a random batch with a fixed seed: 20 sequences of 1 to 10
// tokens whose current values moved from the old ones by up to ±0.6 (so
// the clip at 0.2 binds on both sides), holes in every third mask and
// one sequence with no trainable token.
func valueSeqs() []grpo.ValueSequence {
	rng := rand.New(rand.NewPCG(36, 11))
	seqs := make([]grpo.ValueSequence, 20)
	for i := range seqs {
		n := 1 + rng.IntN(10)
		var s grpo.ValueSequence
		for range n {
			old := rng.NormFloat64() * 0.5
			s.OldValues = append(s.OldValues, old)
			s.Values = append(s.Values, old+(rng.Float64()-0.5)*1.2)
			s.Returns = append(s.Returns, rng.NormFloat64())
		}
		if i%3 == 1 {
			s.Trainable = make([]bool, n)
			for t := range s.Trainable {
				s.Trainable[t] = rng.IntN(3) > 0
			}
		}
		seqs[i] = s
	}
	seqs[4].Trainable = make([]bool, len(seqs[4].Values))
	return seqs
}

// TestValueLossPeerParity computes the clipped value loss under each
// aggregation with rlpipe and with verl's core_algos.compute_value_loss
// (testdata/peer_value.py, under autograd), and wants the loss, the clip
// fraction and every token's gradient equal within 1e-6. It skips, saying
// why, when verl does not import.
func TestValueLossPeerParity(t *testing.T) {
	py := pyvenv.Peer(t)
	seqs := valueSeqs()
	type peerSeq struct {
		V    []float64 `json:"v"`
		Old  []float64 `json:"old"`
		Ret  []float64 `json:"ret"`
		Mask []float64 `json:"mask"`
	}
	type peerCase struct {
		Name string  `json:"name"`
		Clip float64 `json:"clip"`
		Agg  string  `json:"agg"`
	}
	cases := []struct {
		peerCase
		agg grpo.Aggregation
	}{
		{peerCase{"token clip 0.2", 0.2, "token-mean"}, grpo.TokenMean},
		{peerCase{"sequence clip 0.2", 0.2, "seq-mean-token-mean"}, grpo.SequenceMean},
		{peerCase{"token sum norm clip 0.5", 0.5, "seq-mean-token-sum-norm"}, grpo.SeqMeanTokenSumNorm},
	}
	var in struct {
		Seqs  []peerSeq  `json:"seqs"`
		Cases []peerCase `json:"cases"`
	}
	for _, s := range seqs {
		p := peerSeq{V: s.Values, Old: s.OldValues, Ret: s.Returns}
		for t := range s.Values {
			m := 1.0
			if s.Trainable != nil && !s.Trainable[t] {
				m = 0
			}
			p.Mask = append(p.Mask, m)
		}
		in.Seqs = append(in.Seqs, p)
	}
	for _, c := range cases {
		in.Cases = append(in.Cases, c.peerCase)
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	batch := filepath.Join(t.TempDir(), "batch.json")
	if err := os.WriteFile(batch, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := pyvenv.Run(t, "testdata/peer_value.py", nil, py, filepath.Join("testdata", "peer_value.py"), batch)
	type result struct {
		Loss     float64     `json:"loss"`
		ClipFrac float64     `json:"clipfrac"`
		Grad     [][]float64 `json:"grad"`
	}
	var peer map[string]json.RawMessage
	if err := json.Unmarshal(out, &peer); err != nil {
		t.Fatalf("read verl's value loss: %v\n%s", err, out)
	}
	if why, ok := peer["verl_error"]; ok {
		t.Skipf("verl does not import under %s: %s", py, why)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var want result
			if err := json.Unmarshal(peer[c.Name], &want); err != nil {
				t.Fatal(err)
			}
			got, err := grpo.ValueLoss(seqs, grpo.ValueLossOptions{ClipRange: c.Clip, Aggregation: c.agg})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got.Loss-want.Loss) > 1e-6 || math.Abs(got.ClipFrac-want.ClipFrac) > 1e-6 {
				t.Errorf("loss %v clip fraction %v, verl %v and %v", got.Loss, got.ClipFrac, want.Loss, want.ClipFrac)
			}
			if c.Clip == 0.2 && (got.ClipFrac == 0 || got.ClipFrac == 1) {
				t.Errorf("clip fraction %v: the batch does not exercise the clip", got.ClipFrac)
			}
			for i := range seqs {
				for tok := range seqs[i].Values {
					if math.Abs(got.Grad[i][tok]-want.Grad[i][tok]) > 1e-6 {
						t.Errorf("sequence %d token %d: gradient %v, verl %v", i, tok, got.Grad[i][tok], want.Grad[i][tok])
					}
				}
			}
		})
	}
}

// TestValueLossBadInput: a clip range that is not above 0, mismatched
// lengths and a non-finite value are errors.
func TestValueLossBadInput(t *testing.T) {
	one := []grpo.ValueSequence{{Values: []float64{1}, OldValues: []float64{0}, Returns: []float64{1}}}
	for _, tc := range []struct {
		name string
		seqs []grpo.ValueSequence
		o    grpo.ValueLossOptions
		want string
	}{
		{"clip 0", one, grpo.ValueLossOptions{}, "grpo: value clip range 0 must be a number above 0"},
		{"clip NaN", one, grpo.ValueLossOptions{ClipRange: math.NaN()}, "grpo: value clip range NaN must be a number above 0"},
		{"aggregation", one, grpo.ValueLossOptions{ClipRange: 0.2, Aggregation: "median"}, `grpo: unknown aggregation "median"`},
		{"lengths", []grpo.ValueSequence{{Values: []float64{1, 2}, OldValues: []float64{0}, Returns: []float64{1, 1}}}, grpo.ValueLossOptions{ClipRange: 0.2},
			"grpo: sequence 0 has 2 values, 1 old values, 2 returns and 0 mask entries"},
		{"NaN return", []grpo.ValueSequence{{Values: []float64{1}, OldValues: []float64{1}, Returns: []float64{math.NaN()}}}, grpo.ValueLossOptions{ClipRange: 0.2},
			"grpo: value loss NaN over 1 tokens: non-finite loss; the step is not applied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := grpo.ValueLoss(tc.seqs, tc.o)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if tc.name == "NaN return" && !errors.Is(err, grpo.ErrNonFinite) {
				t.Errorf("%v is not an ErrNonFinite", err)
			}
		})
	}
}

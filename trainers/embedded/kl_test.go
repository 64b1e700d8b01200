package embedded_test

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/trainers/embedded"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// The KL estimator by any of its names, and the entropy bonus: k3 (or
// low_var_kl) keeps the default's version, verl's names are the same as
// rlpipe's, a bonus changes the version; an unknown estimator, a
// negative or non-finite coefficient is an option error naming its key.
func TestKLEntropyOptions(t *testing.T) {
	m := embeddedModel(t)
	version := func(o embedded.Options) string {
		t.Helper()
		v, err := o.Version(m)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	def, k1, ent := version(embedded.Options{}), version(embedded.Options{KLEstimator: grpo.K1}), version(embedded.Options{EntropyCoeff: 0.01})
	if k1 == def || ent == def || k1 == ent {
		t.Fatalf("versions: default %s, k1 %s, entropy 0.01 %s: want three", def, k1, ent)
	}
	for _, tc := range []struct {
		name string
		o    embedded.Options
		want string // the version's; "" for an error
		err  string
	}{
		{name: "k3", o: embedded.Options{KLEstimator: grpo.K3}, want: def},
		{name: "low_var_kl", o: embedded.Options{KLEstimator: "low_var_kl"}, want: def},
		{name: "kl is k1", o: embedded.Options{KLEstimator: "kl"}, want: k1},
		{name: "entropy 0 is off", o: embedded.Options{EntropyCoeff: 0}, want: def},
		{name: "an unknown estimator", o: embedded.Options{KLEstimator: "k4"},
			err: `invalid trainer options: kl_estimator: "k4"; use k1, k2 or k3 (verl's kl, mse or low_var_kl)`},
		{name: "a negative entropy coefficient", o: embedded.Options{EntropyCoeff: -0.01},
			err: `invalid trainer options: entropy_coeff: -0.01; it must be ≥ 0 (0 is off; 0.001–0.01 is typical)`},
		{name: "a NaN entropy coefficient", o: embedded.Options{EntropyCoeff: math.NaN()},
			err: `invalid trainer options: entropy_coeff: NaN; it must be ≥ 0 (0 is off; 0.001–0.01 is typical)`},
		{name: "an infinite entropy coefficient", o: embedded.Options{EntropyCoeff: math.Inf(1)},
			err: `invalid trainer options: entropy_coeff: +Inf; it must be ≥ 0 (0 is off; 0.001–0.01 is typical)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.EnsureDefaults()
			if got := errString(o.Validate()); got != tc.err {
				t.Fatalf("error %q, want %q", got, tc.err)
			}
			if _, err := embedded.New(m, tc.o); errString(err) != tc.err {
				t.Errorf("New: error %v, want %q", err, tc.err)
			}
			if tc.err == "" {
				if v := version(tc.o); v != tc.want {
					t.Errorf("version %s, want %s", v, tc.want)
				}
			}
		})
	}
}

// TestTrainsWithKLAndEntropy: each KL estimator trains its own adapter at
// β 0.04, with finite figures and the KL figure its own estimator's mean;
// an entropy bonus trains another adapter than none, and a strong one
// (0.5) leaves the policy with a higher entropy on the batch it trained
// on than no bonus does.
func TestTrainsWithKLAndEntropy(t *testing.T) {
	ctx := context.Background()
	m := embeddedModel(t)
	// Two updates on the same two batches of the base model, so every
	// option sees the same samples; the third batch's first step reports
	// the entropy of the policy the two updates left.
	batches := []embedded.Batch{sampleBatch(t, m, nil, 4, 1), sampleBatch(t, m, nil, 4, 2)}
	train := func(t *testing.T, o embedded.Options) ([]byte, embedded.Metrics, float64) {
		t.Helper()
		o.Epochs, o.Minibatches = 2, 2
		tr := newTrainer(t, m, o)
		var res embedded.Result
		for _, b := range batches {
			var err error
			if res, err = tr.Update(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		dir := filepath.Join(t.TempDir(), "adapter")
		if err := tr.Save(dir); err != nil {
			t.Fatal(err)
		}
		after, err := tr.Update(ctx, batches[1])
		if err != nil {
			t.Fatal(err)
		}
		return readFile(t, dir, "adapter_model.safetensors"), res.Metrics, after.Metrics.Steps[0].Entropy
	}
	k3, _, _ := train(t, embedded.Options{Beta: 0.04})
	none, _, h0 := train(t, embedded.Options{})
	adapters := map[string][]byte{"k3": k3, "no bonus": none}
	for _, tc := range []struct {
		name string
		o    embedded.Options
	}{
		{"k1", embedded.Options{Beta: 0.04, KLEstimator: grpo.K1}},
		{"k2", embedded.Options{Beta: 0.04, KLEstimator: grpo.K2}},
		{"entropy 0.01", embedded.Options{EntropyCoeff: 0.01}},
		{"entropy 0.5", embedded.Options{EntropyCoeff: 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, mt, h := train(t, tc.o)
			for _, x := range []float64{mt.Loss, mt.PolicyLoss, mt.GradNorm, mt.Entropy} {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					t.Fatalf("metrics %+v: not finite", mt.LossFigures)
				}
			}
			for name, other := range adapters {
				if bytes.Equal(got, other) {
					t.Errorf("the adapter equals %s's", name)
				}
			}
			adapters[tc.name] = got
			if tc.o.Beta > 0 && mt.KL == nil {
				t.Error("β 0.04: no KL figure")
			}
			if tc.o.EntropyCoeff == 0.5 {
				t.Logf("entropy after two updates: %.4f with a bonus of 0.5, %.4f without", h, h0)
				if !(h > h0) {
					t.Errorf("entropy after two updates %.6f with a bonus of 0.5, %.6f without: the bonus did not raise it", h, h0)
				}
			}
		})
	}
}

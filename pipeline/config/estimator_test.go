package config_test

import (
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/pipeline/standin"
)

// advTrainKind is a train stage kind that trains on advantages: the plan
// adds the advantages step before it.
type advTrainKind struct{}

func (advTrainKind) Name() string    { return "advtrain" }
func (advTrainKind) Slots() []string { return []string{pipeline.SlotTrain} }
func (advTrainKind) New() kind.Stage { return &advTrain{} }

type advTrain struct{}

func (*advTrain) Check(kind.Checker) {}
func (*advTrain) Task(b kind.Build) (*pipeline.Task, error) {
	return &pipeline.Task{Name: b.Slot, Env: b.Env, Version: "advtrain"}, nil
}
func (*advTrain) Advantages() advantages.TrainOptions { return advantages.TrainOptions{} }

// halved is an estimator: half the distance to the group's mean.
type halved struct{}

func (halved) Name() string { return "halved" }
func (halved) Group(r []float64, mean, _ float64, _ advantages.Options) []float64 {
	out := make([]float64, len(r))
	for i, x := range r {
		out[i] = (x - mean) / 2
	}
	return out
}

// TestAdvantagesEstimator: the advantages section names an estimator of
// the registry, which the plan hands the advantages step (its version
// names it); without the section the step is GRPO's, its version what it
// was before estimators were values.
func TestAdvantagesEstimator(t *testing.T) {
	reg := &kind.Registry{Kinds: []kind.Kind{standin.Kind, advTrainKind{}}, Estimators: advantages.Estimators{halved{}}}
	adv := strings.Replace(base, "train: {kind: standin, sleep: 1s}", "train: {kind: advtrain}", 1)
	const grpo = "join-2 epsilon=1e-06 no_std=false keep_zero_std=false"
	cases := []struct {
		name, src, version, err string
	}{
		{name: "no section: grpo", src: adv, version: grpo},
		{name: "a registered estimator", src: adv + "advantages: {estimator: halved}\n", version: grpo + " estimator=halved"},
		{name: "an unknown estimator", src: adv + "advantages: {estimator: rloo}\n",
			err: `pipeline.yaml:14:14: advantages.estimator: unknown advantage estimator "rloo" (use halved)`},
		{name: "a train stage without advantages", src: base + "advantages: {estimator: halved}\n",
			err: "pipeline.yaml:14:1: advantages: the train stage (kind standin) trains on no advantages (remove it, or use kind: advtrain on the train stage)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse("pipeline.yaml", []byte(tc.src), reg)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("parse: %v\nwant %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, err := c.Plan()
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if p.Stages.Advantages == nil || p.Stages.Advantages.Version != tc.version {
				t.Fatalf("advantages step %+v, want version %q", p.Stages.Advantages, tc.version)
			}
		})
	}
}

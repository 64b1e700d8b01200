package kinds_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// halved is an estimator of the test's own: half the distance to the
// group's mean.
type halved struct{}

func (halved) Name() string { return "halved" }
func (halved) Group(r []float64, mean, _ float64, _ advantages.Options) []float64 {
	out := make([]float64, len(r))
	for i, x := range r {
		out[i] = (x - mean) / 2
	}
	return out
}

// plan is the plan of src with reg, closed (its tasks' versions stay).
func plan(src string, reg *kind.Registry) (config.Plan, error) {
	c, err := config.Parse("pipeline.yaml", []byte(src), reg)
	if err != nil {
		return config.Plan{}, err
	}
	p, err := c.Plan(context.Background())
	if err != nil {
		return config.Plan{}, err
	}
	p.Close()
	return p, nil
}

// advantagesVersion is the version of the advantages step that src
// plans with reg.
func advantagesVersion(src string, reg *kind.Registry) (string, error) {
	p, err := plan(src, reg)
	if err != nil {
		return "", err
	}
	return p.Stages.Step("advantages").Task.Version, nil
}

// TestAdvantagesEstimator: the advantages section names an estimator of
// the registry, which the plan hands the advantages step (its version
// names it); without the section the step is GRPO's, its version what it
// was before estimators were values. std: sample enters the version,
// std: population (the default) does not. An unknown name or std, RLOO
// with one sample per prompt, or the section with a train stage that
// trains on no advantages, fails at its key.
func TestAdvantagesEstimator(t *testing.T) {
	reg := kinds.Registry()
	reg.Estimators = append(reg.Estimators, halved{})
	const grpo = "join-2 epsilon=1e-06 no_std=false keep_zero_std=false"
	checkVersions(t, reg, []versionCase{
		{name: "no section: grpo", src: grpoBase(""), version: grpo},
		{name: "grpo by name", src: grpoBase("advantages: {estimator: grpo}\n"), version: grpo},
		{name: "a registered estimator", src: grpoBase("advantages: {estimator: halved}\n"), version: grpo + " estimator=halved"},
		{name: "an unknown estimator", src: grpoBase("advantages: {estimator: ppo}\n"),
			err: `pipeline.yaml:15:14: advantages.estimator: unknown advantage estimator "ppo" (use dr_grpo or gae or grpo or halved or reinforce_plus_plus_baseline or rloo)`},
		{name: "rloo", src: grpoBase("advantages: {estimator: rloo}\n"), version: grpo + " estimator=rloo"},
		{name: "dr_grpo", src: grpoBase("advantages: {estimator: dr_grpo}\n"), version: grpo + " estimator=dr_grpo"},
		{name: "reinforce++ baseline", src: grpoBase("advantages: {estimator: reinforce_plus_plus_baseline}\n"), version: grpo + " estimator=reinforce_plus_plus_baseline"},
		{name: "rloo with one sample per prompt", src: strings.Replace(grpoBase("advantages: {estimator: rloo}\n"), "n: 8", "n: 1", 1),
			err: "pipeline.yaml:15:14: advantages.estimator: rloo needs at least 2 samples per prompt, but stages.generate.sampling.n is 1 (set stages.generate.sampling.n to 2 or more, or use another estimator)"},
		{name: "grpo with one sample per prompt", src: strings.Replace(grpoBase("advantages: {estimator: grpo}\n"), "n: 8", "n: 1", 1), version: grpo},
		{name: "sample std", src: grpoBase("advantages: {std: sample}\n"), version: grpo + " std=sample"},
		{name: "population std", src: grpoBase("advantages: {std: population}\n"), version: grpo},
		{name: "sample std with rloo", src: grpoBase("advantages: {estimator: rloo, std: sample}\n"), version: grpo + " std=sample estimator=rloo"},
		{name: "gae, verl's defaults", src: grpoBase("advantages: {estimator: gae}\ntrainer: {critic: {lr: 1.0e-3}}\n"), version: grpo + " estimator=gae gamma=1 lambda=1"},
		{name: "gae with one sample per prompt", src: strings.Replace(grpoBase("advantages: {estimator: gae, gamma: 0.99, lambda: 0.95}\ntrainer: {critic: {lr: 1.0e-3}}\n"), "n: 8", "n: 1", 1),
			version: grpo + " estimator=gae gamma=0.99 lambda=0.95"},
		{name: "gamma without gae", src: grpoBase("advantages: {gamma: 0.9}\n"),
			err: "pipeline.yaml:15:14: advantages.gamma: only the gae estimator discounts; grpo does not (remove it, or use estimator: gae)"},
		{name: "lambda out of range", src: grpoBase("advantages: {estimator: gae, lambda: 1.5}\ntrainer: {critic: {lr: 1.0e-3}}\n"),
			err: "pipeline.yaml:15:30: advantages.lambda: 1.5 is not in [0, 1] (use a number from 0 to 1 (verl's default is 1))"},
		{name: "an unknown std", src: grpoBase("advantages: {std: bessel}\n"), err: `pipeline.yaml:15:14: advantages.std: unknown standard deviation "bessel" (use sample or population)`},
		{name: "a train stage without advantages", src: base + "advantages: {estimator: halved}\n",
			err: "pipeline.yaml:14:1: advantages: the train stage (kind standin) trains on no advantages (remove it, or use kind: grpo or kind: external on the train stage)"},
	})
}

// versionCase is a config and the advantages step's version it plans
// to, or the error it fails with.
type versionCase struct{ name, src, version, err string }

// checkVersions plans each case's config with reg.
func checkVersions(t *testing.T, reg *kind.Registry, cases []versionCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := advantagesVersion(tc.src, reg)
			if got := errString(err); v != tc.version || got != tc.err {
				t.Errorf("version %q, error %q\nwant %q, %q", v, got, tc.version, tc.err)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

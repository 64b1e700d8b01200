package config_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/config/configtest"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/policy/policytest"
)

// withSamplesOnly is the shipped registry and a policy backend that
// cannot load adapters, kind samplesonly.
func withSamplesOnly() *kind.Registry {
	reg := kinds.Registry()
	reg.Policies = append(reg.Policies, policytest.BaseOnly{})
	return reg
}

// TestPlanNeedsAdapterLoader: a policy the loop will sample from a
// trained adapter must load adapters; the plan refuses one that cannot,
// naming policy.kind's place and the iteration that would fail, and
// accepts it when no adapter is ever sampled.
func TestPlanNeedsAdapterLoader(t *testing.T) {
	fix := " (use kind " + strings.Join(kinds.Registry().Policies.Kinds(), " or ") + ", or implement policy.AdapterLoader in the backend)"
	cases := []struct {
		name, from, to, policy, want string
	}{
		{"iteration 2 samples the trained adapter", "", "", "samplesonly",
			"pipeline.yaml:14:10: policy.kind: policy kind samplesonly cannot load adapters (policy.AdapterLoader), which the loop needs from iteration 2 to sample stages.generate from the adapter trained before" + fix},
		{"initial policy", "iterations: 3", "iterations: 1\ninitial_policy: main:models/sft/", "samplesonly",
			"pipeline.yaml:15:10: policy.kind: policy kind samplesonly cannot load adapters (policy.AdapterLoader), which the loop needs from iteration 1 to sample stages.generate from initial_policy" + fix},
		{"overlap", "iterations: 3", "iterations: 3\noverlap: {max_staleness: 1}", "samplesonly",
			"pipeline.yaml:15:10: policy.kind: policy kind samplesonly cannot load adapters (policy.AdapterLoader), which the loop needs from iteration 3 to sample stages.generate from the adapter trained before" + fix},
		{"eval of checkpoints", "iterations: 3", "iterations: 1\neval: {set: main:data/h.parquet, every: 1, n: 2, max_tokens: 5}", "samplesonly",
			"pipeline.yaml:15:10: policy.kind: policy kind samplesonly cannot load adapters (policy.AdapterLoader), which eval needs to sample the eval set from each checkpoint's adapter" + fix},
		{"one iteration", "iterations: 3", "iterations: 1", "samplesonly", ""},
		{"overlap past the last iteration", "iterations: 3", "iterations: 2\noverlap: {max_staleness: 1}", "samplesonly", ""},
		{"a policy that loads adapters", "", "", "embedded", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(base, tc.from, tc.to, 1)
			src = strings.Replace(src, "reward: {kind: standin}", "reward: {kind: cel, spec: reward.yaml}", 1)
			src = withRolloutOn(src) + "policy: {kind: " + tc.policy + "}\n"
			c, err := config.Parse("pipeline.yaml", []byte(src), withSamplesOnly())
			if tc.want == "" {
				// The check passes; the reward spec is what fails next,
				// which shows the tasks are built after the check.
				if err != nil {
					t.Fatal(err)
				}
				_, err := c.Plan(context.Background())
				if err == nil || !strings.Contains(err.Error(), "stages.reward.spec") {
					t.Fatalf("plan: %v, want the missing reward spec", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, err := c.Plan(context.Background())
			if err == nil {
				p.Close()
				t.Fatal("plan: no error")
			}
			if err.Error() != tc.want {
				t.Fatalf("plan error:\n got %s\nwant %s", err, tc.want)
			}
			if !errors.Is(err, config.ErrCapability) || !errors.Is(err, pipeline.ErrConfig) {
				t.Errorf("%v is not config.ErrCapability and pipeline.ErrConfig", err)
			}
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Path != "policy.kind" {
				t.Errorf("error %#v does not name policy.kind", ce)
			}
		})
	}
}

// TestPlanNeedsWeightsLoader: a grpo stage with lora: none writes full
// weights, so the policy the loop samples them from must load weights;
// the plan refuses one that cannot, at policy.kind, before any task runs.
func TestPlanNeedsWeightsLoader(t *testing.T) {
	for _, tc := range []struct{ name, policy, trainer, want string }{
		{"a policy that loads no weights", "{kind: samplesonly, model: tiny-arith}", "{lora: none}",
			"pipeline.yaml:14:10: policy.kind: policy kind samplesonly cannot load full weights (policy.WeightsLoader), and the train stage writes them (lora: none); the loop needs from iteration 2 to sample stages.generate from the weights trained before (train a LoRA adapter (remove trainer.lora: none), or implement policy.WeightsLoader in the backend)"},
		{"the embedded policy loads weights", "{kind: embedded}", "{lora: none}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(base, "train: {kind: standin, sleep: 1s}", "train: {kind: grpo}", 1)
			src = strings.Replace(src, "reward: {kind: standin}", "reward: {kind: cel, spec: reward.yaml}", 1)
			src = withRolloutOn(src) + "policy: " + tc.policy + "\ntrainer: " + tc.trainer + "\n"
			c, err := config.Parse("pipeline.yaml", []byte(src), withSamplesOnly())
			if err != nil {
				t.Fatal(err)
			}
			p, err := c.Plan(context.Background())
			if err == nil {
				p.Close()
			}
			if tc.want == "" {
				// The check passes; the reward spec is what fails next.
				if err == nil || !strings.Contains(err.Error(), "stages.reward.spec") {
					t.Fatalf("plan: %v, want the missing reward spec", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want || !errors.Is(err, config.ErrCapability) {
				t.Fatalf("plan error:\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

const rolloutGen = "generate: {kind: rollout, env: gen, sampling: {n: 8, temperature: 1.0, max_tokens: 6}}"

// withRolloutOn swaps src's stand-in generate stage for a rollout stage.
func withRolloutOn(src string) string {
	return strings.Replace(src, "generate: {kind: standin, env: gen, sleep: 2s, samples_per_prompt: 4}", rolloutGen, 1)
}

// TestEvalNeedsScoringReward: eval with a reward kind that cannot score
// is refused before any task runs — by the config's check when the kind
// lacks kind.Scoring, by the plan when its compiled reward is nil.
func TestEvalNeedsScoringReward(t *testing.T) {
	const evalSection = "eval: {set: main:data/h.parquet, every: 1, n: 2, max_tokens: 5}\n"
	_, err := config.Parse("pipeline.yaml", []byte(base+evalSection), kinds.Registry())
	const want = "pipeline.yaml:14:1: eval: evaluation scores with the reward stage's spec, so the reward stage must be kind: cel (use stages.reward: {kind: cel, ...})"
	if err == nil || err.Error() != want {
		t.Fatalf("standin reward:\n got %v\nwant %s", err, want)
	}

	reg := kinds.Registry()
	nothing := &scoringKind{}
	reg.Kinds = append(reg.Kinds, nothing)
	src := strings.Replace(base, "reward: {kind: standin}", "reward: {kind: counted}", 1) + evalSection
	c, err := config.Parse("pipeline.yaml", []byte(src), reg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Plan(context.Background())
	const wantNil = "pipeline.yaml:12:12: eval: the reward stage's kind counted compiled no reward to score the eval set with"
	if err == nil || err.Error() != wantNil || !errors.Is(err, config.ErrCapability) {
		t.Fatalf("nil scorer:\n got %v\nwant %s", err, wantNil)
	}
	if nothing.compiled != 1 || nothing.tasks != 0 {
		t.Errorf("compiled %d times, built %d tasks; want 1 and none", nothing.compiled, nothing.tasks)
	}
}

// TestPlanCompilesRewardOnce: the plan compiles the reward stage's reward
// once and hands that one value to the stage's task and to evaluation.
func TestPlanCompilesRewardOnce(t *testing.T) {
	sk := &scoringKind{scorer: fixedScorer{}}
	reg := kinds.Registry()
	reg.Kinds = append(reg.Kinds, sk)
	var evalScorer kind.Scorer
	reg.Steps = append(reg.Steps, func(b kind.StepBuild) ([]pipeline.Step, error) {
		evalScorer = b.Eval.Scorer
		return nil, nil
	})
	src := strings.Replace(base, "reward: {kind: standin}", "reward: {kind: counted}", 1) +
		"eval: {set: main:data/h.parquet, every: 1, n: 2, max_tokens: 5}\n"
	c, err := config.Parse("pipeline.yaml", []byte(src), reg)
	if err != nil {
		t.Fatal(err)
	}
	p := configtest.MustPlan(t, c)
	if sk.compiled != 1 || sk.tasks != 1 || sk.taskScorer != sk.scorer || evalScorer != sk.scorer {
		t.Errorf("compiled %d times; the task got %v, eval got %v, want %v", sk.compiled, sk.taskScorer, evalScorer, sk.scorer)
	}
	if s := p.Stages.Step("eval"); s == nil || s.Task.Version == "" {
		t.Errorf("eval step: %+v", s)
	}
}

// scoringKind is a reward kind whose Compile returns scorer (nil: none)
// and counts its calls and its tasks; its task records the scorer it was built with.
type scoringKind struct {
	scorer     kind.Scorer
	compiled   int
	tasks      int
	taskScorer kind.Scorer
}

func (k *scoringKind) Name() string    { return "counted" }
func (k *scoringKind) Slots() []string { return []string{pipeline.SlotReward} }
func (k *scoringKind) New() kind.Stage { return &scoringStage{k: k} }

type scoringStage struct{ k *scoringKind }

func (s *scoringStage) Check(kind.Checker) {}
func (s *scoringStage) Compile(kind.Build) (kind.Scorer, error) {
	s.k.compiled++
	return s.k.scorer, nil
}
func (s *scoringStage) Task(b kind.Build) (*pipeline.Task, error) {
	s.k.tasks++
	s.k.taskScorer = b.Scorer
	return &pipeline.Task{Name: "reward", Version: "counted-1"}, nil
}

type fixedScorer struct{}

func (fixedScorer) ScoreSample(context.Context, tables.Trajectory, tables.Prompt, pipeline.Memoizer) (tables.Reward, error) {
	return tables.Reward{}, nil
}
func (fixedScorer) Digest() string { return "sha256:fixed" }
func (fixedScorer) Correctness() tables.Correctness {
	return tables.DefaultCorrectness([]string{"fixed"})
}
func (fixedScorer) ExtractAnswer(string) string {
	return ""
}

// TestPlanChecksSteps: a step a registry adds that cannot be wired (an
// input its producer does not declare, a name used twice, an error of
// its source) fails the plan with the step named, before any task runs.
func TestPlanChecksSteps(t *testing.T) {
	task := &pipeline.Task{Name: "x", Version: "1", Env: "x", Outputs: []pipeline.Output{{Name: "x", File: "x.parquet"}}}
	for _, tc := range []struct {
		name  string
		steps []pipeline.Step
		err   error
		want  string
	}{
		{"undeclared input", []pipeline.Step{{Name: "x", Task: task, After: pipeline.SlotReward,
			Inputs: []pipeline.StepInput{pipeline.From(pipeline.SlotReward, "scores")}}}, nil,
			"invalid pipeline config: step x reads its input scores from output scores of reward, which declares only [rewards]"},
		{"health twice", []pipeline.Step{{Name: "health", Task: task, After: pipeline.SlotTrain}}, nil,
			"invalid pipeline config: two steps are named health; name each step once"},
		{"the source fails", nil, errors.New("filter: threshold missing"),
			"invalid pipeline config: filter: threshold missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := kinds.Registry()
			reg.Steps = append(reg.Steps, func(kind.StepBuild) ([]pipeline.Step, error) { return tc.steps, tc.err })
			c, err := config.Parse("pipeline.yaml", []byte(base), reg)
			if err != nil {
				t.Fatal(err)
			}
			p, err := c.Plan(context.Background())
			if err == nil {
				p.Close()
			}
			if !errors.Is(err, pipeline.ErrConfig) || err == nil || err.Error() != tc.want {
				t.Fatalf("plan: %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestEvalKAtLeastOne: eval.k: [0] is told that k starts at 1; it was
// told to sample at least k per problem, which 16 samples already do.
func TestEvalKAtLeastOne(t *testing.T) {
	src := base + "eval: {set: main:data/h.parquet, every: 1, n: 16, k: [0, 4], max_tokens: 5}\n"
	_, err := config.Parse("pipeline.yaml", []byte(src), kinds.Registry())
	const want = "pipeline.yaml:14:55: eval.k[0]: k must be at least 1, got 0 (k is the k of pass@k, at least 1 and at most eval.n, e.g. k: [1, 4, 8])"
	if err == nil || !strings.Contains(err.Error()+"\n", want+"\n") {
		t.Fatalf("error = %v\nwant a line %s", err, want)
	}
	if strings.Contains(err.Error(), "eval.k[1]") {
		t.Errorf("k: 4 with n: 16 is fine, got %v", err)
	}
}

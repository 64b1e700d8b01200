package kind

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/trackers"
)

// A Kind is one kind of stage that pipeline.yaml can name with kind: under
// stages (standin, command, dataset, rollout, cel, grpo, external, …).
type Kind interface {
	// Name is what kind: says.
	Name() string
	// Slots are the loop's slots the kind can fill (pipeline.SlotSample, …).
	Slots() []string
	// New returns a stage of the kind with zero options: a pointer to a
	// struct whose yaml tags are the keys the kind takes beside the keys
	// every stage has (kind, env, version, settings). The file's node is
	// decoded into it strictly: an unknown key, a wrong type or a bad
	// duration is reported with its file:line:column before Check runs.
	New() Stage
}

// Of is the kind named name whose stages are *S, filling slots: the
// whole of most kinds, which differ only in their stages. S's pointer
// must be a Stage; New returns a zero *S.
func Of[S any, P interface {
	*S
	Stage
}](name string, slots ...string) Kind {
	return &of[S, P]{name: name, slots: slots}
}

type of[S any, P interface {
	*S
	Stage
}] struct {
	name  string
	slots []string
}

func (k *of[S, P]) Name() string    { return k.name }
func (k *of[S, P]) Slots() []string { return slices.Clone(k.slots) }
func (k *of[S, P]) New() Stage      { return P(new(S)) }

// InSection is k with its options in the file's top-level section
// (Sectioned).
func InSection(k Kind, section string) Kind { return sectioned{k, section} }

type sectioned struct {
	Kind
	section string
}

func (s sectioned) Section() string { return s.section }

// A Stage is one configured stage: a kind's decoded options.
type Stage interface {
	// Check reports what the types alone cannot (ranges, keys that go
	// together, the slot), each problem through c.
	Check(c Checker)
	// Task builds the stage's task. An error about one key should be made
	// with At, so that the message names the key's path.
	Task(b Build) (*pipeline.Task, error)
}

// Checker is where a stage's checks report problems. The pipeline config
// implements it; a Fail names the file, line and column of the key.
type Checker interface {
	// Slot is the slot the stage fills.
	Slot() string
	// Set reports whether the file names key, a path below the stage
	// ("sampling.n").
	Set(key string) bool
	// Fail reports a problem at key's place in the file ("" for the
	// stage's own); messages start with the path they are about.
	Fail(key, hint, format string, a ...any)
	// Path is key's full path, for messages ("stages.generate.batch").
	Path(key string) string
	// File is what a check may read of the rest of the file.
	File() File
}

// File is what a stage may know of the rest of its pipeline file.
type File struct {
	// Dir is the file's directory: relative paths are taken from it.
	Dir string
	// Policy is the policy section's kind ("" without one), and
	// PolicyModel its model key.
	Policy, PolicyModel string
	// InitialPolicy reports whether the run starts from an adapter (the
	// first iteration then has a policy input).
	InitialPolicy bool
	// MaxStaleness is overlap.max_staleness: how many policy updates a
	// sample may lag (0: on-policy).
	MaxStaleness int
	// Losses are the registry's policy losses (Registry.Losses), which a
	// train stage's loss key names.
	Losses Losses
	// Estimator is the advantages section's estimator (nil: the default,
	// or a name the registry lacks, which the section's check reports).
	Estimator advantages.Estimator
}

// Build is what a stage's task is built from.
type Build struct {
	// Slot is the slot the task fills; Env its task environment; Version
	// the stage's version: key, to fold into the task's version.
	Slot, Env, Version string
	File               File
	// Policy is the opened policy section (nil without one).
	Policy *policy.Opened
	// Scorer is the reward a Scoring stage's Compile returned, compiled
	// once by the plan, for the stage's Task to score with (nil for
	// other stages).
	Scorer Scorer
	// Estimator is the advantages section's estimator (nil: the default,
	// advantages.GRPO): a Stepped train stage builds its advantages step
	// with it.
	Estimator advantages.Estimator
	// PopulationStd is the advantages section's std: population (false:
	// the sample std, the default); a Stepped train stage sets
	// advantages.Options.PopulationStd from it.
	PopulationStd bool
	// Gamma and Lambda are the advantages section's GAE γ and λ (1 and 1
	// unless set); a Stepped train stage sets advantages.Options' from
	// them. Only a CriticEstimator reads them.
	Gamma, Lambda float64
	// MaskTruncated is the advantages section's
	// mask_truncated_completions; a Stepped train stage sets
	// advantages.TrainOptions.MaskTruncated from it.
	MaskTruncated bool
}

// Versioned is v with the stage's version: key appended ("+2"), or v.
func (b Build) Versioned(v string) string {
	if b.Version == "" {
		return v
	}
	return v + "+" + b.Version
}

// Optional parts of a kind.
type (
	// Nouned names a kind's stages in messages ("a cel reward stage");
	// without it they are "NAME stages".
	Nouned interface{ Noun() string }
	// Sectioned is a kind whose options are a top-level section of the
	// file instead of keys of its stage (grpo: trainer, the
	// hyperparameters). The section is decoded into New's value.
	Sectioned interface{ Section() string }
	// Sampler is a stage that samples from the policy section; a policy
	// section that no stage samples from is an error.
	Sampler interface{ SamplesPolicy() }
	// EvalGenerator is a generate stage that samples the eval set its own
	// way (episodes: n episodes of its environment per problem): the
	// eval section's generate task is its, and the registry's Eval
	// builder still makes the score task.
	EvalGenerator interface {
		EvalGenerate(e Eval, b Build) (*pipeline.Task, error)
	}
	// Scoring is a reward stage whose reward evaluation scores with too:
	// the cel reward stage. The plan calls Compile once, before any task
	// is built, and hands the result to the stage's Task (Build.Scorer)
	// and to the eval step source (Eval.Scorer); an error about one key
	// should be made with At. A config with an eval section needs a
	// Scoring reward stage, and Compile must return a Scorer.
	Scoring interface {
		Compile(b Build) (Scorer, error)
	}
	// Stepped is a stage that adds steps to the iteration (a train
	// stage that trains on advantages adds the advantages step between
	// reward and train, advantages.Step): the plan builds them with the
	// stage's Build, after its task, and drops from a slot's task the
	// outputs of the steps that feed it (pipeline.Feeding).
	Stepped interface {
		Steps(b Build) ([]pipeline.Step, error)
	}
	// Grouped is a generate stage that says how many samples it draws
	// per prompt (the group size) and under which of its keys
	// ("sampling.n"), so that an estimator that needs more
	// (advantages.MinGroup) fails at plan time naming it. n ≤ 0: unknown.
	Grouped interface {
		GroupSize() (key string, n int)
	}
	// Keyworded is an option's value, a struct of keys, that may also be
	// written as one of a few scalar keywords (the embedded trainer's
	// lora: none). The config accepts exactly those scalars where a
	// mapping of its keys is expected, and names the key for any other;
	// the value's UnmarshalYAML decodes the keyword.
	Keyworded interface{ Keywords() []string }
	// WeightsTrainer is a train stage that may write full model weights
	// instead of an adapter (the grpo stage with lora: none): when
	// TrainsWeights says it does, the plan asks the policy to load
	// weights (policy.WeightsLoader) where it would ask it to load
	// adapters.
	WeightsTrainer interface{ TrainsWeights() bool }
)

// OnAdvantages is train as the loop runs it after an advantages step
// (pipeline.Feeding): a copy without the advantages output
// (pipeline.OutAdvantages), which the step writes to the same file.
func OnAdvantages(train *pipeline.Task) *pipeline.Task {
	return pipeline.Feeding(train, pipeline.SlotTrain, []pipeline.Step{{Before: pipeline.SlotTrain, Outputs: []string{pipeline.OutAdvantages}}})
}

// Scorer scores samples with a compiled reward: what the reward stage
// hands evaluation (kind.Build.Scorer, kind.Eval.Scorer,
// evaluators.TaskOptions.Reward), so that evaluation scores exactly as
// the loop's reward stage does without importing it. The reward stage's
// compiled spec (*rewards.Program) is one; it is the one Scorer type.
type Scorer interface {
	// ScoreSample scores one sample of a problem; the error is for a
	// canceled context only, a failed row is in the reward's status.
	// memo is the scoring task call's (its *pipeline.TaskContext): the
	// judges and verifiers record their calls there, so a retried or
	// resumed evaluation pays for none twice.
	ScoreSample(ctx context.Context, traj tables.Trajectory, prompt tables.Prompt, memo pipeline.Memoizer) (tables.Reward, error)
	// Digest identifies the spec (it enters the score task's version).
	Digest() string
	// Correctness is the spec's rule for a correct sample.
	Correctness() tables.Correctness
	// ExtractAnswer is the answer a completion gives ("" when none).
	ExtractAnswer(completion string) string
}

// Noun is how messages name k's stages.
func Noun(k Kind) string {
	if n, ok := k.(Nouned); ok {
		return n.Noun()
	}
	return k.Name() + " stages"
}

// KeyError is a Task error about one key of the stage.
type KeyError struct {
	Key string
	Err error
}

func (e *KeyError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *KeyError) Unwrap() error { return e.Err }

// At marks err as about key.
func At(key string, err error) error {
	if err == nil {
		return nil
	}
	return &KeyError{Key: key, Err: err}
}

// Eval is what the eval section's tasks are built from.
type Eval struct {
	Policy *policy.Opened
	// Sampling is the same for every checkpoint.
	Sampling policy.Sampling
	Seed     int64
	// Set names the eval set in paths and tables; Ks are the k of pass@k.
	Set string
	Ks  []int
	// Metrics are the registry's, computed at every k.
	Metrics Metrics
	// Scorer is the reward stage's, compiled once by the plan (never nil
	// when a config's plan builds the eval tasks).
	Scorer Scorer
	// Loop is when and on what the loop evaluates (every, the eval set).
	Loop pipeline.EvalConfig
	// Generate, set when the generate stage samples the eval set its own
	// way (EvalGenerator), is that stage's eval task in environment env,
	// the score task's.
	Generate func(env string) (*pipeline.Task, error)
}

// StageGenerates says the generate stage samples the eval set
// (EvalGenerator, Generate set): the builder's generate task is not used,
// and measures of single-turn sampling (the embedded model's exact
// pass@1) do not apply.
func (e Eval) StageGenerates() bool { return e.Generate != nil }

// StepSource makes the steps a registry adds to every run's iteration
// (the training health, the evaluation); it returns none when the file
// asks for nothing it adds (no eval section). An error is a config error.
type StepSource func(StepBuild) ([]pipeline.Step, error)

// StepBuild is what a StepSource builds its steps from.
type StepBuild struct {
	// Policy is the opened policy section (nil without one).
	Policy *policy.Opened
	// Eval is the eval section (nil without one).
	Eval *Eval
}

// Registry is what a pipeline file can name: the stage kinds, the other
// plug-ins (policy and tracker backends, advantage estimators, evaluation
// metrics, RL environments), and the steps every run's iteration may have
// (training health, evaluation). The program that reads pipeline files
// assembles it in one place (cli/kinds.Registry); only store drivers
// register by import, by URI scheme.
type Registry struct {
	// Kinds in the order messages list them.
	Kinds []Kind
	// Policies are the policy section's backends; Trackers the tracking
	// section's.
	Policies policy.Backends
	Trackers trackers.Backends
	// Estimators are the advantage estimators the advantages section
	// names; without the section the loop uses advantages.GRPO.
	Estimators advantages.Estimators
	// Losses are the policy losses a trainer section's loss key names
	// (Loss; the embedded trainer's are trainers/grpo.PolicyLoss values);
	// without the key the trainer uses its default. A stage sees them as
	// File.Losses.
	Losses Losses
	// Metrics are what evaluation reports at each k (Eval.Metrics).
	Metrics Metrics
	// Environments are the RL environments an episodes stage names.
	Environments environments.RLEnvs
	// Executors are what `rlpipe run --executor NAME` names: where the
	// task calls of a run driven in this process run (pipeline.Local).
	Executors pipeline.ExecutorKinds
	// Steps add iteration steps after the stages' own, in this order
	// (reports.HealthSteps, evaluators.Steps).
	Steps []StepSource
}

// Lookup returns the kind named name. A nil registry has no kinds.
func (r *Registry) Lookup(name string) (Kind, bool) {
	if r == nil {
		return nil, false
	}
	for _, k := range r.Kinds {
		if k.Name() == name {
			return k, true
		}
	}
	return nil, false
}

// Fills reports whether k can fill slot.
func Fills(k Kind, slot string) bool { return slices.Contains(k.Slots(), slot) }

// Hint lists the kinds for "use …": a kind that fills every slot by its
// name, the others after their slot, "(train) grpo or external".
func (r *Registry) Hint() string {
	if r == nil {
		r = &Registry{}
	}
	var items []string
	lastSlot := ""
	for _, k := range r.Kinds {
		if len(k.Slots()) == len(pipeline.Slots) {
			items, lastSlot = append(items, k.Name()), ""
			continue
		}
		slot := strings.Join(k.Slots(), ", ")
		if slot == lastSlot {
			items[len(items)-1] += " or " + k.Name()
			continue
		}
		items, lastSlot = append(items, fmt.Sprintf("(%s) %s", slot, k.Name())), slot
	}
	switch len(items) {
	case 0:
		return "no stage kinds are registered"
	case 1:
		return "use " + items[0]
	}
	return "use " + strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// OnlyIn reports whether the stage fills slot, and if not says that only
// that slot's stage does what (OnlyIn(c, "generate", "can be a rollout")).
func OnlyIn(c Checker, slot, what string) bool {
	if c.Slot() == slot {
		return true
	}
	c.Fail("kind", "use standin or command", "%s: only the %s stage %s", c.Path("kind"), slot, what)
	return false
}

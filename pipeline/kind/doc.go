// Package kind is the contract between a pipeline file and the stages: a
// stage kind (kind: rollout under stages.generate) is a Kind, and the
// program that reads pipeline files lists the kinds it knows in a
// Registry.
//
// A kind has a name, the loop slots it can fill (pipeline.Slots) and a New
// that returns a zero Stage: a pointer to a struct whose yaml tags are the
// keys the kind takes beside the ones every stage has (kind, env,
// version, settings). The pipeline config walks the file against that
// struct, so unknown keys, wrong types and bad durations are reported with
// file:line:column before anything of the kind runs, and a key that
// another kind takes is named as such ("only rollout stages take
// sampling"). Then the Stage's Check reports what types alone cannot,
// through a Checker, and its Task builds the *pipeline.Task.
//
// A new kind is one file in the package that implements it, plus one line
// in the registry the program assembles (cli/kinds):
//
//	var Kind = kind.Of[Echo]("echo", pipeline.SlotReward)
//
//	type Echo struct {
//		Score float64 `yaml:"score"`
//	}
//
//	func (e *Echo) Check(c kind.Checker) { kind.OnlyIn(c, pipeline.SlotReward, "can be an echo") }
//	func (e *Echo) Task(b kind.Build) (*pipeline.Task, error) { ... }
//
// Of makes the Kind of a name, its slots and the options struct; a kind
// with more to say implements Kind itself. Optional interfaces say more:
// Nouned (how messages name the kind's stages), Sectioned (the options
// are a top-level section, as grpo's trainer:, which InSection adds),
// Sampler (the stage samples from the policy section), Scoring (the plan
// compiles the stage's reward once and hands it to the stage's task and
// to evaluation), Stepped (the stage adds iteration steps: the grpo and
// external train stages add the advantages step).
//
// A Registry holds the kinds and the step sources every run's iteration
// may have (StepSource: the training health, the evaluation), so adding a
// step is one file and one registration line.
//
// Command is the kind the engine itself provides: an external command
// whose argv is filled from the stage's inputs, outputs and params.
//
// # The registry
//
// Registry is one value with a typed slot per plug-in kind: Kinds (stage
// kinds), Policies (policy.Backend), Trackers (trackers.Backend),
// Environments (environments.RLEnv), Metrics (Metric, declared here so
// that the registry can hold it), Estimators (advantages.Estimator),
// Losses (Loss, a name whose computing trainer asserts its own contract,
// trainers/grpo.PolicyLoss; a stage sees them as File.Losses),
// Executors (pipeline.ExecutorKind), and Steps (StepSource: the health and
// eval steps). Every value has a Name; each list's Lookup
// (or the config's walk, for stage kinds and backends) fails on an unknown
// name with the names it has. The program assembles the value in one
// place (cli/kinds.Registry) and hands it to config.Parse; nothing
// registers into a global, so a test adds a kind of its own to its own
// copy. docs/ARCHITECTURE.md ("Where to add X") gives, for each slot, the
// one file, the one line and the suite a new value runs.
//
// # Checklist for a stage kind
//
//   - Required: Kind (Name, Slots, New) and its Stage (Check, Task); Task
//     declares the outputs its slot needs (pipeline.Slots).
//   - Optional: Nouned, Sectioned, Sampler (required to sample the policy
//     section), Scoring (required of a reward kind a config with eval:
//     uses), Stepped, EvalGenerator.
//   - Its test: pipeline/config/kindtest.Run with a valid stage and a bad
//     key; one entry in cli/kinds.Registry's Kinds.
//   - A Metric: Name and Value; its test evaluators/metrictest.Run.
package kind

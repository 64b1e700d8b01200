// Package config reads pipeline.yaml, the file that describes an RL loop
// for `rlpipe run`, and turns it into the engine's inputs.
//
// Parsing is strict and says where a problem is. Every unknown key, wrong
// type, missing key and dangling reference is reported with the file,
// line and column, and a hint when one helps:
//
//	pipeline.yaml:12:5: unknown key "retires" in environments.gen (did you mean "retries"?)
//	pipeline.yaml:20:29: stages.generate.env: environment "gne" is not defined under environments (did you mean "gen"?)
//
// Each problem is an *Error (errors.As), and every one is a
// pipeline.ErrConfig (errors.Is). Sections that later versions define
// (reward) are rejected with ErrReserved rather than ignored, so a config
// written for a later version never runs silently without them.
//
// The package knows the file's shared sections (the loop, environments,
// eval, machine) and nothing of any stage kind or policy backend. Each
// stage names a kind of a kind.Registry that the program reading the file
// assembles (cli/kinds.Registry is rlpipe's); the kind decodes its own
// keys into the value its New returns, checks them and builds the task.
// The walk over the YAML tree learns a kind's keys from that value, so an
// unknown key still gets "did you mean", and a key of another kind says
// which kind takes it ("only rollout stages or episodes stages take sampling"). The policy
// section works the same way with the backends of the registry's Policies.
//
// Use it in three steps:
//
//	c, err := config.Load("pipeline.yaml", kinds.Registry()) // or Parse(name, bytes, reg)
//	err = c.CheckDataset(ctx, store)                          // batch_size ≤ the dataset's prompts
//	plan, err := c.Plan(ctx)                                  // RunOptions, LoopConfig, Stages (with their steps)
//	plan.Run.Name = "exp2"                  // what the command line overrides
//	run, err := pipeline.Open(ctx, store, plan.Run)
//	state, err := run.Loop(ctx, plan.Loop, plan.Stages)
//
// Plan checks what the loop will need of the plug-ins it opens before it
// builds any task: a policy the loop samples from a trained adapter must
// be a policy.AdapterLoader, and an eval section needs a reward stage
// whose kind.Scoring compiles a reward. A plug-in that falls short is an
// ErrCapability naming the key that chose it. The reward is compiled
// once and handed to the reward task and to evaluation.
//
// Durations are Go duration strings ("200ms", "2s", "5m"). Environment
// settings keep "zero means not set": the engine resolves them
// environment → stage (settings:) → call over its own defaults.
//
// An external command (kind: command, kind.Command) may hold
// {{inputs.NAME}}, {{outputs.NAME}}, {{params.NAME}}, {{attempt}},
// {{seed}}, {{iteration}} and {{workdir}} in its argv; it must declare the
// outputs the loop needs from its stage (pipeline.OutPrompts, ...), and
// every placeholder is checked against the stage's inputs, outputs and
// params before anything runs.
//
// Secrets never leave the process: the value of any key whose name
// contains api_key, secret or password, or has the word token (HF_TOKEN,
// not max_tokens), is replaced by "<redacted>" in YAML, the config a run
// records as run/config.yaml, and so in Hash, which identifies what the
// config makes a run do (run name, store and formatting aside). Two
// configs that differ only in a secret hash the same.
//
// The full reference of the file is docs/PIPELINE.md.
package config

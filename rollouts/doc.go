// Package rollouts is the generate stage of the RL loop: it turns a prompts
// table and a policy version into a trajectories table.
//
// Task builds the stage from any policy.Policy — the embedded model in
// process, `rlpipe policy serve` over HTTP, or a vLLM server through
// policy/openai. When the loop passes an adapter directory as the policy
// input, the task names it by its content digest ("adapter-<12 hex>"),
// loads it once through policy.Adapters (copying it first to
// Options.AdapterRoot when the server reads adapters from a shared
// mount), samples from it, and unloads adapters older than the last
// Options.KeepAdapters. Every row records the policy version and seed that
// produced it; a sample the policy could not produce is a row with its
// status and error, which rewards and trainers skip rather than score 0.
//
// Seeds: prompt p in a call seeded s is requested with
// policy.RequestSeed(s, p), and its j-th sample draws from
// policy.SampleSeed of that, so trajectories are byte-identical for a
// given run seed however prompts are batched or transported.
package rollouts

// Package policy is the contract between rlpipe and whatever generates
// text: a model server speaking the OpenAI API (vLLM, SGLang, llama.cpp;
// see policy/openai), or the embedded tiny model (policy/tiny), in process
// or behind `rlpipe policy serve` (policy/server).
//
// A Policy takes a batch of Requests — plain prompts or chat transcripts —
// and returns Sampling.N samples for each, with text, token ids, per-token
// log-probabilities where the policy has them, a finish reason and the
// policy version that produced them. A request that fails becomes samples
// with a status, never a crash and never a silent empty answer, so a
// trainer can skip them instead of scoring them 0.
//
// Seeds: sample j of a request seeded s draws from SampleSeed(s, j), so the
// same seed gives the same text in process and over HTTP, whatever the
// batching. RequestSeed derives a request's seed from the run seed and the
// request id.
//
// Tools: a chat Request may offer Tools in the function-calling format
// (policy/toolcall) with a ToolChoice; a transcript's Messages carry the
// assistant's ToolCalls and, for role "tool", the ToolCallID they answer,
// encoded in OpenAI's shapes. A policy that parses calls server-side
// returns them in Sample.ToolCalls, Text then being the content before
// them and TokenIDs still every sampled token; one that does not leaves
// them in Text as the model wrote them. Message.Text is what the model
// wrote for an assistant message (toolcall.Join): how a policy without a
// chat template, the tiny model, reads it.
//
// Checkpoints: a train task's output is a PEFT adapter or, with full
// fine-tuning, a Hugging Face model directory (CheckpointKind tells them
// apart; CheckShards checks sharded weights against their index).
// Policies that load full weights while they run implement WeightsLoader
// beside AdapterLoader; the Adapters loader below dispatches on the kind
// and names weights "weights-<12 hex>", so the rows' policy version is
// one code path for both.
//
// Adapters: policies that hot-load LoRA adapters implement AdapterLoader,
// which a pipeline needs from its second iteration (pipeline/config's
// plan refuses a policy without it for a loop that would load one);
// Sampling.Adapter then selects the adapter a batch samples from, the way a
// vLLM request names a LoRA module as its model. The Adapters loader is
// what a stage uses to sample from a checkpoint: it names an adapter
// directory by its content digest ("adapter-<12 hex>"), loads it once
// (copying it first to a directory the server reads, when given one: a
// shared mount, or LocalAdapterRoot for a server on this machine), and
// unloads the oldest beyond a limit. A copy stays until the server has
// unloaded its adapter, since a server may read the files again whenever
// it holds it (vLLM reloads what its LoRA cache evicted); Opened.Close
// unloads what is left. Its errors that retrying cannot fix match
// ErrAdapterInput.
//
// One generate path: the generate stage, evaluation and the episodes
// stage sample from a task's policy input the same way. A Source (the
// policy, its identity, its Adapters; NewSource) makes a Checkpoint of
// the input's adapter directory: the sampling that selects it and the
// version its rows carry. Source.Rows then sends the prompts in batches,
// checks that every prompt got its samples, turns them into trajectory
// rows (PromptRequest, TrajectoryRow) and fails a call none of whose
// samples was served; Checkpoint.Failed forgets an adapter the policy
// lost, so the task's next attempt loads it again. A checkpoint evaluated
// samples exactly as the loop would:
//
//	src := policy.NewSource(p, "tiny-arith", opened.Adapters(), "", 0)
//	rows, err := src.Rows(ctx, tc.InputPath("policy"), prompts, policy.RowsOptions{
//		Sampling: sampling, Seed: seed, Row: policy.RowParams{Iteration: 3}})
//	// errors.Is(err, policy.ErrAdapterInput): retrying cannot help
//
// The episodes stage, which runs its own turns, takes the first step only:
// src.Checkpoint, then Checkpoint.Sampling for its runner and
// Checkpoint.Failed on an episode's error.
//
// In-process models: an opened policy whose model runs in this process
// (the embedded backend) sets Opened.Model, a Local. What a stage needs of
// it beyond sampling is a named interface found by type assertion, never
// a concrete type: ExactScorer for evaluation's exact pass@1, or one the
// stage declares beside its code (trainers/embedded.Trainable, the
// weights the grpo trainer trains). A backend offers only what it can;
// servers set no Model.
//
// Backends: a Backend is a value with a Name (policy/embedded.Backend,
// "embedded"; policy/openai.Backend, "openai"). The program lists its
// backends in one registry value (kind.Registry's Policies, assembled by
// cli/kinds.Registry), and Backends.Open opens the policy a pipeline's
// policy section names with the backend of its kind, so the stages that
// sample never know a backend's type. A new backend is one file (or
// package) with its Backend value, plus one line in cli/kinds.Registry;
// its test runs policy/policytest.
package policy

// Package environments is where a policy meets a task: datasets of
// verifiable problems, multi-turn simulators and sandboxed agent worlds,
// and the runner that plays a policy through their episodes.
//
// # Subpackages
//
//   - arith: the "a+b=" task with its train/held-out split rule, shared
//     with the embedded model's pretraining.
//   - datasets: question/answer datasets (GSM8K and the like) from JSONL or
//     Parquet into the store as prompts tables.
//   - guess: "guess the number", a small multi-turn text environment.
//   - agent: worlds of files, built once and cached by digest, in which
//     each episode gets a private copy-on-write copy and runs its tool
//     calls in the bubblewrap sandbox.
//
// # Environments and episodes
//
// An Env runs one episode at a time. Reset(ctx, id) starts episode id and
// returns the first observation; Step(ctx, action) applies the policy's
// reply and returns the next observation, a reward and whether the episode
// is done; End releases the episode's resources. The episode's randomness
// comes from RNG(id), seeded by the FNV-1a hash of the id, so the same id
// always replays the same episode:
//
//	env := guess.New(nil)
//	obs, _ := env.Reset(ctx, "guess-0001") // "I am thinking of a whole number…"
//	st, _ := env.Step(ctx, "50")           // st.Observation "higher", st.Done false
//
// # Running episodes
//
// A Runner plays a policy.Policy through an episode: one chat request per
// turn holding the transcript so far (an optional system message, then
// observations as user messages and the policy's replies as assistant
// messages), until the environment is done or a budget is spent:
//
//	r, err := environments.NewRunner(p, &environments.RunnerOptions{
//		MaxTurns:         10,               // then status "truncated"
//		MaxEpisodeTokens: 4096,             // the whole token sequence; then "truncated"
//		Timeout:          30 * time.Second, // then status "timeout"
//		Sampling: policy.Sampling{Temperature: 1, MaxTokens: 256, Logprobs: true},
//	})
//	res, err := r.Run(ctx, env, environments.Episode{ID: "guess-0001", SampleIndex: 3})
//
// The Result holds the episode as a trajectories-table row (its turns, the
// last reply as the completion, the token ids and logprobs of all replies
// concatenated, the policy version, the status and its reason) and the
// rewards. An episode that did not finish — truncated, timeout, a policy or
// environment failure — has a status other than ok and its reason in
// Trajectory.Error: skip it, never train on it as reward 0. Run returns an
// error only when the whole call failed (ctx ended, Generate failed, or a
// token budget was set for a policy that returns no token ids).
//
// The episode id fixes the environment; SampleIndex fixes the policy's
// sampling seeds (policy.RequestSeed of the run seed and
// "id#sample/turn"), so a group of G episodes sharing an id faces the same
// problem with G different samples, and a replay with the same seeds is
// identical.
//
// # Token-in/token-out
//
// The Result's Trajectory.Sequence is the episode's exact token sequence
// when every turn's prompt, as the policy tokenized it, begins with the
// tokens before it. A chat template that renders earlier turns anew (a
// thinking model's, which drops earlier <think> blocks) breaks that, and
// the episode is not trained on (Result.Unaligned). RunnerOptions.Renderer
// runs episodes token-in/token-out instead: the runner holds the sequence
// and sends each turn as policy.Request.PromptTokenIDs, the sequence plus
// the Renderer's tokens for the messages since; the template never sees
// the earlier turns again. The embedded model (*tiny.Model) is a
// Renderer; environments/chattemplate renders a Hugging Face chat
// template.
//
// Scripted turns a Go function of the transcript into a policy: for
// rule-based baselines, examples and tests.
//
// # Tool calls
//
// An Env that also implements ToolOffer offers the policy tools in the
// function-calling format: its Tools go in every request of the episode.
// Step still receives the reply as text, the calls as Hermes <tool_call>
// blocks (toolcall.Join of the content and calls a policy returned apart,
// Sample.ToolCalls), and parses them with toolcall.Parse. A Step whose
// ToolResults answer each call, in order, makes the turn structured: the
// assistant message carries the calls (ids call_<turn>_<k>), each result
// comes back as a message of role "tool" with its call's id, and the
// trajectory records the calls in OpenAI's tool_calls shape and the
// results as turns of role "tool", the reply's sampled tokens kept. A
// malformed call is answered with feedback in Observation, as any
// malformed action. docs/ROLLOUTS.md, "Tool calls", has the whole rule.
//
// # Checklist for an RL environment
//
//   - Required: Env (Reset, Step, End), its randomness from the episode id,
//     and an RLEnv (Name, Options, Open → Maker) that an episodes stage
//     names by rl_env.
//   - Optional: Func(name, maker) for an environment without options,
//     Typed(name, open) for one with (open takes the decoded *Options);
//     wrapping ErrInfra for machinery that failed; ToolOffer and
//     Step.ToolResults for tools in the function-calling format.
//   - Its test: environments/envtest.Run; one entry in the envs list of
//     cli/kinds.Registry.
package environments

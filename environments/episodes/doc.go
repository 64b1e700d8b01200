// Package episodes makes multi-turn episodes a stage of the loop: the
// generate stage of kind episodes runs G episodes of an environment per
// prompt with the run's policy, and writes them to the trajectories table
// like samples, each with its exact token sequence and trainable mask.
//
//	stages:
//	  generate:
//	    kind: episodes
//	    rl_env: guess         # an RL environment the program registers (NewKind);
//	                          # env, as on every stage, is its task environment
//	    rl_options: {}        # the environment's own options (environments.RLEnv.Options)
//	    episodes: 8           # G per prompt: the group of group-relative advantages
//	    max_turns: 8          # the turn budget: then the episode is truncated
//	    timeout: 30s          # the wall-clock budget of an episode (0: none)
//	    max_episode_tokens: 4096  # the token budget: the most tokens of the episode's
//	                          # whole sequence (prompts, observations, replies); past
//	                          # it the episode is truncated (default: none)
//	    concurrency: 4        # episodes run at once
//	    sampling: {temperature: 1.0, max_tokens: 8}
//
// Episode j of prompt p is environments.Episode{ID: p.PromptID,
// SampleIndex: j}: the G episodes of a prompt share the environment's
// randomness (one problem) and differ in the policy's samples, whose seeds
// derive from the task's seed, the episode and the turn. A fixed seed
// therefore gives the same table, and a task killed halfway runs again
// whole: its rows are byte-identical (unless a wall-clock budget ends an
// episode). An episode's status is the runner's: ok, truncated, timeout,
// env_error, infra_error, never a reward; its turns, the replies' token
// ids and logprobs, and (when the policy returns its prompts' token ids,
// which the stage asks for) sequence_ids and trainable are in its row.
// The environment's per-step rewards and its Info (a verifier's output)
// are not the reward: the reward stage scores the row, as for samples.
//
// Every environment of a call is made before its first episode, and
// every one made is ended (Env.End) exactly once: by the runner when its
// episode runs, else by the task — when a later one cannot be made, the
// call is cancelled, or an earlier episode fails the call, the episodes
// not yet begun are not reset, only ended, so no world, workspace or
// process of theirs outlives the call.
package episodes

// Package envtest is the conformance suite every RL environment
// (environments.RLEnv) runs as its test:
//
//	func TestRLEnv(t *testing.T) {
//		envtest.Run(t, envtest.Suite{Env: guess.RLEnv, Prompt: tables.Prompt{PromptID: "p"}, Player: bisect})
//	}
//
// Each scenario is a subtest on environments the RLEnv's Maker makes
// fresh for the suite's prompt:
//
//   - "named": a non-empty name without spaces (what rl_env says).
//   - "opens": Open with the options gives a Maker, and the same version
//     twice (the version enters the task's cache key).
//   - "reset": Reset gives a non-empty first observation, and End after
//     it returns nil.
//   - "episode ends": Suite.Player's actions end an episode (Done)
//     within MaxSteps, every step without an error and with a finite
//     reward.
//   - "deterministic by seed": two environments playing the same
//     episode id with the same actions see the same observations,
//     rewards and ends.
//   - "malformed action": a malformed action (Suite.Bad) is the policy's
//     mistake, answered with an observation or the episode's end, never
//     an error (environments.Env's contract).
//   - "end": End without an episode, and twice after one, returns nil.
package envtest

// Package harbor runs Harbor tasks (the harbor Python package's task
// format) as an RL environment, with rlpipe's own machinery: it reads the
// task in Go, builds the task's world in a bubblewrap sandbox, runs the
// agent's tool calls in a copy-on-write copy of it, and runs the task's
// tests in a separate sandbox over a read-only view of the final world.
// Harbor itself (Python 3.12, Docker) is needed only as the reference the
// parity test and the benchmark compare with.
//
// # Tasks
//
// A task is a directory (Load; a directory of them is LoadDir):
//
//	task.toml               [task] name, [agent] timeout_sec, [verifier] timeout_sec and env, [environment] env, workdir
//	instruction.md          the prompt
//	environment/Dockerfile  the world (below)
//	tests/test.sh           the verifier: writes /logs/verifier/reward.txt or reward.json
//	solution/solve.sh       optional: the oracle's answer
//
// Prompts turns tasks into a prompts table, one row per task: the
// instruction as the prompt, the task's name as the prompt id, and
// {"harbor_task": NAME, "path": DIR} as the metadata (`rlpipe dataset
// harbor DIR` writes it).
//
// # The Dockerfile, as far as the host provides the tools
//
// There is no Docker: the world is a tree of directories (/app, /root…)
// over the host's read-only system. ParseDockerfile honours
//
//   - FROM: recorded, ignored;
//   - WORKDIR: made, and the directory the agent and the verifier start
//     in (default /app);
//   - ENV: given to RUN and to the agent's tool calls (not the verifier);
//   - COPY from environment/, the build context: a source with a symlink
//     on its path is refused at import, and the build opens each source
//     with no symlink followed (openat2) and copies from that open file,
//     so a link planted after the import fails the build instead of
//     copying the host's files into the world;
//   - RUN: run once, when the world is built, in the sandbox with the
//     world's directories writable, bounded by [environment]
//     build_timeout_sec; the world is then cached by the digest of the
//     Dockerfile and environment/ (agent.Cache).
//
// Anything else refuses the task at import with the file, the line and
// the reason (ErrUnsupported): another instruction (ADD, EXPOSE, USER…), a
// RUN that needs a package manager or the network (apt-get, pip, curl…)
// or a program the host lacks, a path under the host's system (/usr,
// /etc…) or the sandbox's own (/tmp, /tests, /logs), a prebuilt
// docker_image, GPUs, several steps.
//
// # Episodes
//
// Env gives each episode a private workspace of the world
// (agent.World.NewWorkspace). The agent's tool calls are agent's fenced
// bash blocks (agent.ParseToolCall, agent.FormatHelp): each runs in the
// sandbox with the workspace's directories at their paths (/app), the
// Dockerfile's ENV, no network; the workspace's root is in no sandbox
// (its /work is a tmpfs of its own), so the agent cannot put a link where
// /app is bound. [agent] timeout_sec bounds the tool calls
// together; once it is spent the episode is verified as it stands.
//
// # The verifier, out of the agent's reach
//
// A reply without a bash block ends the episode, and Verify judges the
// final workspace:
//
//  1. The workspace is walked (agent.UnsafePaths, strict): a symlink the
//     episode made that leads out of it or resolves to nothing in it, a
//     FIFO, a socket or a device scores 0 (status unsafe_path) and the
//     tests do not run. A link "../tests/x" dangles on the host but
//     would reach the tests in the verifier's sandbox; a FIFO would hold
//     it until its timeout.
//  2. tests/test.sh runs in a sandbox of its own, as Harbor runs it:
//     `(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1` in the
//     task's working directory, with the world's directories read-only
//     at their paths, tests/ read-only at /tests (never in the agent's
//     world), /logs/verifier its only writable directory, the host's
//     PATH and HOME=/tmp (a cat, bash or pytest the agent planted on the
//     task's PATH, its dotfiles, are not used), [verifier] env, and
//     [verifier] timeout_sec.
//  3. Its reward, read as Harbor's verifier reads it: reward.json (an
//     object of finite numbers, or one number) wins over reward.txt (one
//     number). Each of reward.json's numbers is a reward component
//     (Step.Info["reward_components"], in the row's env_outcome); the
//     episode's reward is the "reward" component, or the mean of the
//     components when there is none. No reward file, an empty one, a
//     value that is not a finite number, or a timeout is an ErrReward:
//     the episode is an env_error with the task and the file named,
//     never a reward of 0.
//
// # Differences from Harbor
//
// No network in any phase; programs run as the sandbox's user (nobody
// under root), not root; the verifier always runs separately, over the
// whole final world (Harbor's "separate" mode copies only declared
// artifacts); [agent] and [verifier] user, network and resource keys are
// ignored.
package harbor

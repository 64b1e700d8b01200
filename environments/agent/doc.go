// Package agent is a sandboxed agent environment: a policy works on a
// world of files by running bash commands, and a verifier scores the
// files it leaves.
//
// # Worlds
//
// A world is a directory tree defined by a WorldSpec: a Source directory
// copied in, inline Files, and a Build function run on the host, with a
// Version standing for Build's code. A Cache builds each world once, in a
// temporary directory renamed into place when complete, and keeps it under
// the digest of its definition; a changed definition is a new world, an
// unchanged one is never rebuilt:
//
//	cache, _ := agent.NewCache("/var/cache/rlpipe/worlds")
//	world, _ := cache.World(ctx, agent.WorldSpec{Name: "repo", Source: "fixtures/repo"})
//
// # Episodes and their workspaces
//
// Each episode gets a Workspace, a private copy-on-write copy of the world:
//
//   - ModeOverlay (chosen when the process may mount, e.g. as root): a
//     tmpfs of WorkspaceOptions.SizeBytes for the episode, holding the
//     upper layer of an overlay whose lower layer is the cached world.
//     Setup is two mount calls whatever the world's size (under 2 ms for
//     100 MB, about 270 times faster than a copy; see BenchmarkEpisodeSetup),
//     and the episode cannot write more than SizeBytes.
//   - ModeCopy, the fallback: `cp --reflink=auto -a` of the world, instant
//     on btrfs or XFS, a full copy elsewhere. Workspace.Mode says which ran
//     and Workspace.Fallback why.
//
// (bubblewrap 0.9 can mount overlays itself, --overlay-src; Debian
// bookworm's 0.8 cannot, hence the mounts on the host.)
//
// Every tool call of the episode is a separate sandbox run
// (sandbox.RunIn) with the workspace bound as /work, its working
// directory, so what one call writes the next one sees. The sandbox is the
// reward sandbox: no network (its own network namespace, not even the
// host's loopback), a read-only system, nothing else of the host visible,
// and its CPU, wall-clock, memory, output, file-size and process limits.
// Closing the workspace deletes the episode's writes; the world never
// changes.
//
// # The tool-call format
//
// An assistant message calls the bash tool with a fenced code block whose
// info string is bash (or sh, shell):
//
//	I will look at the failing test.
//	```bash
//	cat tests/test_sum.sh
//	```
//
// Only the first such block runs, as one bash script. The observation is
// the exit status and the output, each stream cut to ObservationBytes
// (head and tail kept):
//
//	exit status 1 (failed)
//	stdout:
//	(empty)
//	stderr:
//	cat: tests/test_sum.sh: No such file or directory
//
// A message without a block is the final answer: the episode ends and the
// task's Verifier, a bash script, runs in the final workspace. Its reward
// is the number on its last "reward: X" line, else 1 when it exits 0 and 0
// otherwise. Env.Step records the verifier's status, exit code and stdout
// in Step.Info, so the runner's Result keeps them. FormatHelp, appended to
// every instruction, tells the policy all this in three sentences.
//
// # Running
//
// Env implements environments.Env; run it with environments.Runner, one
// Env per concurrent episode (they may share the World):
//
//	env, _ := agent.NewEnv(world, agent.Task{
//		Instruction: "Make tests/run.sh pass.",
//		Verifier:    "bash tests/run.sh",
//	}, nil)
//	res, err := runner.Run(ctx, env, environments.Episode{ID: "repo-fix-1"})
//
// The runner's turn budget ends a long episode as "truncated", its
// wall-clock budget as "timeout" (a running tool call is killed); either
// way the workspace is deleted.
//
// # Requirements
//
// bubblewrap and util-linux, as for package sandbox. Under root, sandboxed
// programs run as nobody: cached worlds are given to nobody (the cache
// directory itself stays private), and every directory down to the
// workspace's ScratchDir must be searchable by others (os.TempDir is).
package agent

// Package agent is a sandboxed agent environment: a policy works on a
// world of files by running bash commands, and a verifier the policy
// cannot reach scores the files it leaves.
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
//   - ModeCopy, the fallback: `cp -a` of the world onto a tmpfs of its own,
//     the world's size plus SizeBytes, so that the episode cannot write
//     more than SizeBytes here either (a copy on the scratch directory let
//     one tool call put 360 MiB there; the tmpfs stops it at 64 MiB, the
//     default, as the overlay does). Where mounting is refused altogether,
//     the copy goes to the scratch directory (`cp --reflink=auto`, instant
//     on btrfs or XFS), each file bounded by the sandbox's FileBytes but
//     not the whole. Workspace.Mode says which mode ran and
//     Workspace.Fallback why, and whether the copy is unbounded.
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
// A Task's Files are written into each of its episodes' workspaces at
// Reset, over the world's, as the sandbox's user: one world then serves
// many problems, each prompt row carrying its input (metadata "files").
// The agent may rewrite them (they are not protected), so a verifier
// compares with Checks, never with a task file.
//
// Options for small models: NoHelp gives the instruction alone;
// MaxReplies judges the workspace after that many replies, whatever the
// last was (its calls run first); EndOnMalformed judges it at a reply
// whose calls cannot be read. Either way the episode ends scored where a
// turn budget or a full context would have ended it unjudged.
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
// A message without a block is the final answer, and the episode ends.
// FormatHelp, appended to every instruction (unless Options.NoHelp),
// tells the policy all this in three sentences.
//
// # Tool calls in the function-calling format
//
// With Options.Tools (rl_options tools: true) the Env also offers Tools
// to the policy (environments.ToolOffer), with JSON Schemas of their
// arguments: bash {cmd}, read_file {path}, write_file {path, text} and
// submit {answer?}, and ToolsHelp replaces FormatHelp in the instruction.
// A reply holding <tool_call> is read with toolcall.Parse and its calls
// run in order, each answered in Step.ToolResults (the runner sends them
// back as tool messages):
//
//	<tool_call>
//	{"name": "write_file", "arguments": {"path": "out.txt", "text": "42"}}
//	</tool_call>
//
// bash runs in the sandbox as a fenced block does. read_file and
// write_file act on the workspace from the host with the sandbox's path
// rules: paths are relative to /work (or absolute under /work), ".." may
// not climb out, and they are opened with openat2 RESOLVE_BENEATH, so a
// symlink that leads out of the workspace is refused rather than
// followed on the host; a written file belongs to the sandbox's user and
// is bounded by Limits.FileBytes and the workspace's size. submit judges
// the workspace and ends the episode (its answer in Step.Info["answer"];
// calls after it are not run). The policy's mistakes are answered, never
// errors: a malformed call (its JSON, its form) runs nothing and says
// what is wrong in the Observation; an unknown tool, a missing required
// argument or one the schema does not have (toolcall.Check), and a path
// out of the workspace are that call's result. The fenced block stays
// the fallback for base models, automatically: a reply without
// <tool_call> runs its ```bash block, or is the final answer.
//
// # Judging, out of the agent's reach
//
// The agent is rewarded for passing, so whatever it can reach that decides
// the reward it will, given samples enough, use: a test script in the
// workspace it can rewrite to exit 0, a program whose output the verifier
// reads that prints "reward: 1". The Task's judgement keeps the rules of
// the reward verifiers (docs/REWARDS.md, "Verifiers that cannot be
// gamed"), in four steps after the final answer:
//
//  1. Protected: the paths the agent must not change (the tests, their
//     data) are compared with the world; any change, removal or addition
//     scores 0 with status "tampered", names the paths in
//     Step.Info["tampered"], and nothing runs.
//  2. Run: the candidate phase executes the agent's work (its program, the
//     tests that call it) in the final workspace, in a sandbox without the
//     checks and without a verdict channel. What it writes to protected
//     paths is tampering too.
//  3. Paths: the verifier opens paths of the workspace the agent made, so
//     before it runs, the workspace is walked: a symlink the episode made
//     that does not resolve beneath the workspace (openat2 with
//     RESOLVE_BENEATH and RESOLVE_NO_MAGICLINKS: an absolute target, ".."
//     out of it, /proc/self/…) and a FIFO, socket or device it made score
//     0 with status "unsafe_path", the paths named in verifier_reason, and
//     the verifier does not run. A link to /check/rows.txt named
//     report.txt would otherwise hand the verifier its own answer, and a
//     FIFO would hold it until its wall limit. Entries the world holds as
//     they are pass.
//  4. Verifier: a bash script, in a sandbox of its own on the workspace,
//     with Checks (the expected outputs) read-only at /check, Run's stdout,
//     stderr, exit_code and status read-only at /candidate, and
//     $RLPIPE_VERDICT, a pipe only it has. Its verdict is what it writes
//     there: pass, fail, or a number; without one, its exit status. Its
//     stdout is never read for the reward.
//
// The verifier must not run the workspace's code itself: that code would
// inherit the verdict channel, see /check, and decide the verifier's exit
// status. That is what Run is for.
//
// Env.Step records the outcome in Step.Info, so the runner's Result keeps
// it: verifier_status (the verifier's sandbox status, "tampered",
// "unsafe_path" or "bad_verdict"), verifier_exit_code, verifier_stdout, verifier_verdict,
// verifier_reason, tampered, and run_status and run_exit_code when the
// task has a Run.
//
// # Running
//
// Env implements environments.Env; run it with environments.Runner, one
// Env per concurrent episode (they may share the World):
//
//	env, _ := agent.NewEnv(world, agent.Task{
//		Instruction: "Fix lib/ so that tests/run.sh passes.",
//		Protected:   []string{"tests"},
//		Run:         "bash tests/run.sh",
//		Checks:      map[string][]byte{"expected.txt": expected},
//		Verifier:    `cmp -s /candidate/stdout /check/expected.txt`,
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

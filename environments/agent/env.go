package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/policy/toolcall"
	"github.com/rlpipe/rlpipe/sandbox"
)

// Task is what an agent must do in a world, and how its work is judged.
//
// When the agent answers, the Env judges the final workspace in four
// steps, none of which the agent's tool calls can reach or fake:
//
//  1. Protected paths are compared with the world. Any change scores 0,
//     with status StatusTampered, and nothing runs.
//  2. Run, when set, runs the agent's work in the workspace: the candidate
//     phase, without the checks or a verdict channel. (Protected paths are
//     compared again after it.)
//  3. The workspace is walked: a symlink the episode (or Run) made that
//     leads out of it, and a FIFO, socket or device it made, score 0 with
//     status StatusUnsafePath, and the verifier does not run.
//  4. Verifier judges, in a sandbox of its own, with Checks and Run's
//     outcome read-only and a verdict channel that only it has.
//
// The verifier must never run the workspace's code itself (source or
// execute its scripts, import its modules, run make, or git in a
// repository whose configuration the agent could write): that code would
// get the verdict channel and decide the verifier's exit status. Put it in
// Run and judge what it printed at /candidate.
type Task struct {
	// Instruction is the episode's first observation; FormatHelp (or
	// ToolsHelp) follows it unless Options.NoHelp.
	Instruction string
	// Verifier is a bash script run in the sandbox when the agent gives
	// its final answer, with the final workspace as /work, its working
	// directory. It sees Checks at /check/NAME and, when Run is set, Run's
	// outcome at /candidate (see CandidateDir), both read-only; HOME is
	// /tmp, so that dotfiles the agent left in /work do not configure its
	// tools.
	//
	// Its reward is its verdict, what it writes to the path in
	// $RLPIPE_VERDICT (sandbox.EnvVerdict): pass (1), fail (0), a number,
	// or "reward: X" (see ParseVerdict); anything else written scores 0
	// with status StatusBadVerdict. Without a verdict its reward is 1
	// when it exits 0 and 0 otherwise, the exit status of its own last
	// command: rely on it only when the verifier runs no code of the
	// workspace. A verifier stopped by a limit scores 0. Its stdout is
	// recorded, never read for a reward: any program can print
	// "reward: 1".
	Verifier string
	// Run, optional, is the candidate phase: a bash script run after the
	// agent answers, in the final workspace, in a sandbox like the tool
	// calls' (no checks, no verdict channel): run the tests, the program,
	// whatever executes the agent's work. Its stdout, stderr, exit code
	// and status reach the verifier read-only at /candidate. A Run
	// stopped by a limit is still judged: /candidate/status says which.
	Run string
	// Checks are files only the verifier sees, read-only at /check/NAME:
	// the tests, the expected outputs. Names are clean relative paths
	// ("expected.txt", "cases/1.txt"). They are never in the workspace,
	// and no tool call or Run sees them.
	Checks map[string][]byte
	// Protected are world-relative paths, files or directories, that the
	// agent must leave as they are in the world: the tests Run executes,
	// the data the verifier compares with. Any change there (content,
	// permissions, type, a file removed, or added under a protected
	// directory) scores 0 with status StatusTampered, and Verdict.Tampered
	// names the paths. NewEnv checks that each is clean, relative, inside
	// the world (no symlink on the way) and in it.
	Protected []string
	// Files are the task's own files, written into each episode's
	// workspace at Reset over the world's: the problem's input when one
	// world serves many problems (a file per row of a dataset). Names are
	// clean relative paths whose directories are in the world, each at
	// most Limits.FileBytes. A file may not be protected (Protected
	// compares with the world, which does not have it), so the agent can
	// rewrite it: a verifier must take what it compares with from Checks,
	// never from a task file.
	Files map[string][]byte
}

// Options tune an Env. A nil *Options means the defaults.
type Options struct {
	// Limits bound each tool call, the Run phase and the verifier; zero
	// fields mean the sandbox's defaults.
	Limits sandbox.Limits
	// Workspace tunes the episodes' world copies.
	Workspace WorkspaceOptions
	// ObservationBytes bounds stdout and stderr in an observation; 0 means
	// DefaultObservationBytes.
	ObservationBytes int
	// Tools offers the policy the tools bash, read_file, write_file and
	// submit in the function-calling format (Tools, ToolsHelp); a reply
	// without <tool_call> is still read as a fenced bash block or the
	// final answer. False: the fenced block only, as before.
	Tools bool
	// NoHelp gives the instruction alone, without FormatHelp or ToolsHelp:
	// for a model pretrained on the task's tools, whose context has no
	// room for them (the embedded tiny-tool).
	NoHelp bool
	// EndOnMalformed judges the episode at a reply whose tool calls (or
	// fenced block) cannot be read, as it stands (the error in
	// Info["malformed_tool_call"]), in place of answering with the error:
	// for a small model whose context has no room for another turn after
	// an error, where the episode would otherwise outgrow it and never be
	// scored.
	EndOnMalformed bool
	// MaxReplies, when positive, judges the episode once the policy has
	// replied that many times without finishing, the last reply's calls
	// run first: a budget of replies that ends scored, as Harbor's agent
	// timeout does, where the runner's max_turns (or a context the next
	// turn outgrows) would end the episode unjudged.
	MaxReplies int
}

// Verdict is the judgement of an episode's final state.
type Verdict struct {
	Reward float64
	// Status says how the judgement ended: the verifier's sandbox status
	// (ok, failed, timeout, …), StatusTampered, StatusUnsafePath or
	// StatusBadVerdict.
	Status string
	// Reason says more when there is more to say: the verifier's reason
	// after pass: or fail:, the changed paths, the unsafe paths, the bad
	// verdict.
	Reason string
	// Tampered lists the protected paths the episode or Run changed,
	// removed or added, in path order; under a path removed or added, only
	// that path.
	Tampered []string
	// Run is the candidate phase's result; nil without Task.Run, or when
	// the episode tampered before it.
	Run *sandbox.Result
	// Result is the verifier's run, its Verdict what it wrote to its
	// channel; zero when the verifier did not run (tampering).
	Result sandbox.Result
}

// Env is a sandboxed agent environment: each episode gets a private
// copy-on-write workspace of the world, every tool call runs in the
// sandbox with the workspace as /work, and the verifier scores the
// workspace when the agent answers. One Env runs one episode at a time;
// make one per concurrent episode (they may share the World).
type Env struct {
	world *World
	task  Task
	o     Options

	ws        *Workspace
	calls     int
	replies   int
	verdict   *Verdict
	protected treeState // the world at task.Protected, once read
}

var _ environments.Env = (*Env)(nil)

// NewEnv returns an environment for task in world.
func NewEnv(world *World, task Task, opts *Options) (*Env, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if world == nil {
		return nil, fmt.Errorf("agent env: no world: %w", ErrInvalid)
	}
	if err := validateTask(world, task); err != nil {
		return nil, err
	}
	limit := cmp.Or(o.Limits.FileBytes, sandbox.DefaultFileBytes)
	for _, name := range slices.Sorted(maps.Keys(task.Files)) {
		if n := int64(len(task.Files[name])); n > limit {
			return nil, fmt.Errorf("agent env for world %q: task file %q: %d bytes is past the sandbox's file size limit of %d bytes: %w",
				world.Name, name, n, limit, ErrInvalid)
		}
	}
	task.Checks = maps.Clone(task.Checks)
	task.Files = maps.Clone(task.Files)
	task.Protected = slices.Clone(task.Protected)
	return &Env{world: world, task: task, o: o}, nil
}

// Reset ends any running episode, makes a fresh workspace and returns the
// instruction. The world is the same for every id: the id seeds nothing
// here, and a task that wants randomness builds it into the world.
func (e *Env) Reset(ctx context.Context, id string) (string, error) {
	if err := e.End(); err != nil {
		return "", err
	}
	ws, err := e.world.NewWorkspace(ctx, &e.o.Workspace)
	if err != nil {
		if errors.Is(err, ErrInvalid) {
			return "", err
		}
		return "", fmt.Errorf("episode %s: %w", id, err)
	}
	e.ws, e.calls, e.replies, e.verdict = ws, 0, 0, nil
	for _, name := range slices.Sorted(maps.Keys(e.task.Files)) {
		if err := e.putFile(name, string(e.task.Files[name])); err != nil {
			return "", fmt.Errorf("episode %s: write the task's file %s into the workspace: %v: %w", id, name, err, ErrInfra)
		}
	}
	if e.o.NoHelp {
		return e.task.Instruction, nil
	}
	help := FormatHelp
	if e.o.Tools {
		help = ToolsHelp
	}
	return strings.TrimRight(e.task.Instruction, "\n") + "\n\n" + help, nil
}

// Step runs the tool call in action, or, when action has none, judges the
// workspace (see Task) and ends the episode.
//
// With Options.MaxReplies, the reply that spends the budget runs its
// calls, then the workspace is judged as it stands (Info["replies_spent"]).
func (e *Env) Step(ctx context.Context, action string) (environments.Step, error) {
	e.replies++
	st, err := e.step(ctx, action)
	if err != nil || st.Done || e.o.MaxReplies <= 0 || e.replies < e.o.MaxReplies {
		return st, err
	}
	st.Info["replies_spent"] = e.replies
	fin, err := e.finish(ctx, st.Info)
	if err != nil {
		return environments.Step{}, err
	}
	fin.ToolCalls, fin.ToolResults = st.ToolCalls, st.ToolResults
	if st.Observation != "" {
		// The last call's output (or the malformed call's error) stays
		// in the transcript, before the verdict.
		fin.Observation = st.Observation + "\n" + fin.Observation
	}
	return fin, nil
}

func (e *Env) step(ctx context.Context, action string) (environments.Step, error) {
	if e.ws == nil {
		return environments.Step{}, errors.New("agent: Step without an episode: call Reset first")
	}
	info := map[string]any{"workspace_mode": string(e.ws.Mode())}
	if e.ws.Fallback() != "" {
		info["workspace_fallback"] = e.ws.Fallback()
	}
	if e.o.Tools && strings.Contains(action, toolcall.Open) {
		return e.callTools(ctx, action, info)
	}
	call, ok, err := ParseToolCall(action)
	if err != nil && e.o.EndOnMalformed {
		info["malformed_tool_call"] = err.Error()
		return e.finish(ctx, info)
	}
	if err != nil {
		return environments.Step{Observation: err.Error() + "; nothing was run.", Info: info}, nil
	}
	if !ok {
		return e.finish(ctx, info)
	}
	e.calls++
	info["tool_calls"] = e.calls
	calls, err := call.JSON()
	if err != nil {
		return environments.Step{}, fmt.Errorf("tool call %d: %w", e.calls, err)
	}
	obs, err := e.bash(ctx, call.Command)
	if err != nil {
		return environments.Step{}, err
	}
	return environments.Step{Observation: obs, ToolCalls: calls, Info: info}, nil
}

// bash runs a tool call's script in the workspace and returns the
// observation; the error is for a sandbox that failed, not the script.
func (e *Env) bash(ctx context.Context, script string) (string, error) {
	r, err := e.ws.Run(ctx, script, e.o.Limits)
	return ToolObservation(ctx, r, err, e.calls, e.o.ObservationBytes)
}

func (e *Env) finish(ctx context.Context, info map[string]any) (environments.Step, error) {
	v, err := e.judge(ctx)
	if err != nil {
		return environments.Step{}, err
	}
	e.verdict = &v
	info["tool_calls"] = e.calls
	info["verifier_status"] = v.Status
	if v.Reason != "" {
		info["verifier_reason"] = v.Reason
	}
	if v.Tampered != nil {
		info["tampered"] = slices.Clone(v.Tampered)
	}
	if v.Run != nil {
		info["run_status"] = string(v.Run.Status)
		info["run_exit_code"] = v.Run.ExitCode
	}
	if v.Result.Status != "" {
		info["verifier_exit_code"] = v.Result.ExitCode
		info["verifier_stdout"] = v.Result.Stdout
		if v.Result.Verdict != "" {
			info["verifier_verdict"] = v.Result.Verdict
		}
	}
	info["reward"] = v.Reward
	if err := e.End(); err != nil {
		return environments.Step{}, fmt.Errorf("verifier: %v: %w", err, ErrInfra)
	}
	obs := fmt.Sprintf("verified: reward %g", v.Reward)
	if v.Status == StatusTampered || v.Status == StatusUnsafePath {
		obs += " (" + v.Reason + ")"
	}
	return environments.Step{Observation: obs, Reward: v.Reward, Done: true, Info: info}, nil
}

// Verdict returns the verifier's judgement of the last episode, once it
// has answered.
func (e *Env) Verdict() (Verdict, bool) {
	if e.verdict == nil {
		return Verdict{}, false
	}
	return *e.verdict, true
}

// Workspace returns the running episode's workspace, nil between episodes.
func (e *Env) Workspace() *Workspace { return e.ws }

// End deletes the running episode's workspace.
func (e *Env) End() error {
	if e.ws == nil {
		return nil
	}
	err := e.ws.Close()
	e.ws = nil
	return err
}

package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/sandbox"
)

// Task is what an agent must do in a world, and how its work is judged.
type Task struct {
	// Instruction is the episode's first observation; FormatHelp follows it.
	Instruction string
	// Verifier is a bash script run in the sandbox, in the episode's final
	// workspace, when the agent gives its final answer. Its reward is the
	// number on the last stdout line of the form "reward: X" (or
	// "reward=X") when there is one, else 1 if it exits 0 and 0 otherwise.
	Verifier string
}

// Options tune an Env. A nil *Options means the defaults.
type Options struct {
	// Limits bound each tool call and the verifier; zero fields mean the
	// sandbox's defaults.
	Limits sandbox.Limits
	// Workspace tunes the episodes' world copies.
	Workspace WorkspaceOptions
	// ObservationBytes bounds stdout and stderr in an observation; 0 means
	// DefaultObservationBytes.
	ObservationBytes int
}

// Verdict is the verifier's judgement of an episode's final state.
type Verdict struct {
	Reward float64
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

	ws      *Workspace
	calls   int
	verdict *Verdict
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
	if strings.TrimSpace(task.Verifier) == "" {
		return nil, fmt.Errorf("agent env for world %q: the task has no verifier: %w", world.Name, ErrInvalid)
	}
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
	e.ws, e.calls, e.verdict = ws, 0, nil
	return strings.TrimRight(e.task.Instruction, "\n") + "\n\n" + FormatHelp, nil
}

// Step runs the tool call in action, or, when action has none, runs the
// verifier and ends the episode.
func (e *Env) Step(ctx context.Context, action string) (environments.Step, error) {
	if e.ws == nil {
		return environments.Step{}, errors.New("agent: Step without an episode: call Reset first")
	}
	info := map[string]any{"workspace_mode": string(e.ws.Mode())}
	if e.ws.Fallback() != "" {
		info["workspace_fallback"] = e.ws.Fallback()
	}
	call, ok, err := ParseToolCall(action)
	if err != nil {
		return environments.Step{Observation: err.Error() + "; nothing was run.", Info: info}, nil
	}
	if !ok {
		return e.finish(ctx, info)
	}
	e.calls++
	info["tool_calls"] = e.calls
	r, err := e.ws.Run(ctx, call.Command, e.o.Limits)
	switch {
	case errors.Is(err, sandbox.ErrInvalid):
		return environments.Step{Observation: "the command cannot run: " + err.Error(), ToolCalls: call.JSON(), Info: info}, nil
	case err != nil && ctx.Err() != nil:
		return environments.Step{}, fmt.Errorf("tool call %d: %w", e.calls, err)
	case err != nil:
		return environments.Step{}, fmt.Errorf("tool call %d: %v: %w", e.calls, err, ErrInfra)
	}
	return environments.Step{Observation: Observation(r, e.o.ObservationBytes), ToolCalls: call.JSON(), Info: info}, nil
}

func (e *Env) finish(ctx context.Context, info map[string]any) (environments.Step, error) {
	r, err := e.ws.Run(ctx, e.task.Verifier, e.o.Limits)
	if err != nil {
		if ctx.Err() != nil {
			return environments.Step{}, fmt.Errorf("verifier: %w", err)
		}
		return environments.Step{}, fmt.Errorf("verifier: %v: %w", err, ErrInfra)
	}
	v := Verdict{Result: r, Reward: verdictReward(r)}
	e.verdict = &v
	info["tool_calls"] = e.calls
	info["verifier_status"] = string(r.Status)
	info["verifier_exit_code"] = r.ExitCode
	info["verifier_stdout"] = r.Stdout
	info["reward"] = v.Reward
	if err := e.End(); err != nil {
		return environments.Step{}, fmt.Errorf("verifier: %v: %w", err, ErrInfra)
	}
	return environments.Step{Observation: fmt.Sprintf("verified: reward %g", v.Reward), Reward: v.Reward, Done: true, Info: info}, nil
}

// verdictReward reads the verifier's reward: the last "reward: X" line of
// stdout, else its exit status.
func verdictReward(r sandbox.Result) float64 {
	lines := strings.Split(strings.TrimRight(r.Stdout, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		rest, ok := strings.CutPrefix(l, "reward")
		if !ok {
			continue
		}
		rest = strings.TrimLeft(rest, " ")
		if rest == "" || (rest[0] != ':' && rest[0] != '=') {
			continue
		}
		if x, err := strconv.ParseFloat(strings.TrimSpace(rest[1:]), 64); err == nil && !math.IsNaN(x) && !math.IsInf(x, 0) {
			return x
		}
	}
	if r.Passed() {
		return 1
	}
	return 0
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

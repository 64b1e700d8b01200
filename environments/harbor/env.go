package harbor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/sandbox"
)

// Options tune an Env. A nil *Options means the defaults.
type Options struct {
	// Limits bound each tool call and the verifier; zero fields mean the
	// sandbox's defaults. The task's [agent] timeout_sec bounds the
	// episode's tool calls together and [verifier] timeout_sec the
	// verifier, over Limits.Wall.
	Limits sandbox.Limits
	// Workspace tunes the episodes' world copies.
	Workspace agent.WorkspaceOptions
	// ObservationBytes bounds stdout and stderr in an observation; 0 means
	// agent.DefaultObservationBytes.
	ObservationBytes int
}

// Env runs episodes of one Harbor task: each in a private copy-on-write
// workspace of the task's world, the agent's tool calls in the sandbox
// with the world's directories at their paths (/app), and the task's
// tests/test.sh in a sandbox of its own when the agent answers (see
// Verify). One Env runs one episode at a time.
type Env struct {
	task         *Task
	world, tests *agent.World
	o            Options

	ws    *agent.Workspace
	start time.Time
	calls int
}

var _ environments.Env = (*Env)(nil)

// NewEnv returns an environment for task, whose worlds Task.Worlds built.
func NewEnv(task *Task, world, tests *agent.World, opts *Options) (*Env, error) {
	if task == nil || world == nil || tests == nil {
		return nil, errors.New("harbor env: a task and its two worlds are required")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	return &Env{task: task, world: world, tests: tests, o: o}, nil
}

// Reset ends any running episode, makes a fresh workspace and returns the
// task's instruction with agent.FormatHelp.
func (e *Env) Reset(ctx context.Context, id string) (string, error) {
	if err := e.End(); err != nil {
		return "", err
	}
	ws, err := e.world.NewWorkspace(ctx, &e.o.Workspace)
	if err != nil {
		return "", fmt.Errorf("episode %s of harbor task %s: %w", id, e.task.Name, err)
	}
	e.ws, e.start, e.calls = ws, time.Now(), 0
	return strings.TrimRight(e.task.Instruction, "\n") + "\n\n" + agent.FormatHelp, nil
}

// Step runs the tool call in action in the workspace, or, when action has
// none, or when the task's agent timeout is spent, verifies the workspace
// and ends the episode.
func (e *Env) Step(ctx context.Context, action string) (environments.Step, error) {
	if e.ws == nil {
		return environments.Step{}, errors.New("harbor: Step without an episode: call Reset first")
	}
	info := map[string]any{"harbor_task": e.task.Name, "workspace_mode": string(e.ws.Mode())}
	call, ok, err := agent.ParseToolCall(action)
	if err != nil {
		return environments.Step{Observation: err.Error() + "; nothing was run.", Info: info}, nil
	}
	if !ok {
		return e.finish(ctx, info, "")
	}
	lim, spent := e.agentLimits()
	if spent {
		return e.finish(ctx, info, e.timeoutNote())
	}
	e.calls++
	info["tool_calls"] = e.calls
	calls, err := call.JSON()
	if err != nil {
		return environments.Step{}, err
	}
	// The world's directories at their paths; /work is the sandbox's own
	// tmpfs, not the workspace's root, which the agent must not reach
	// (it could put a link where /app is bound).
	d := e.task.Dockerfile
	m, err := mounts(e.ws.Root(), d.Tops)
	if err != nil {
		return environments.Step{}, fmt.Errorf("tool call %d: %w", e.calls, err)
	}
	r, err := sandbox.Run(ctx, sandbox.Spec{Command: inDir(d.Workdir, call.Command), Env: withHome(d.Env, "/root"), Mounts: m, Limits: lim})
	st, err := agent.ToolStep(ctx, r, err, e.calls, calls, info, e.o.ObservationBytes)
	if err != nil {
		return st, err
	}
	if _, spent := e.agentLimits(); spent {
		end, err := e.finish(ctx, info, e.timeoutNote())
		end.ToolCalls = calls
		end.Observation = st.Observation + "\n\n" + end.Observation
		return end, err
	}
	return st, nil
}

// agentLimits bounds the next tool call by what is left of the agent's
// timeout; spent says nothing is.
func (e *Env) agentLimits() (sandbox.Limits, bool) {
	lim := e.o.Limits
	budget := e.task.AgentTimeout()
	if budget == 0 {
		return lim, false
	}
	left := budget - time.Since(e.start)
	if left <= 0 {
		return lim, true
	}
	if lim.Wall == 0 || lim.Wall > left {
		lim.Wall = min(left, max(lim.Wall, sandbox.DefaultWall))
	}
	return lim, false
}

func (e *Env) timeoutNote() string {
	return fmt.Sprintf("the agent's time is up (task.toml [agent] timeout_sec %gs); ", e.task.AgentTimeout().Seconds())
}

// finish verifies the workspace and ends the episode.
func (e *Env) finish(ctx context.Context, info map[string]any, note string) (environments.Step, error) {
	if note != "" {
		info["agent_timeout"] = true
	}
	info["tool_calls"] = e.calls
	v, err := Verify(ctx, e.task, e.world, e.tests, e.ws.Root(), e.o.Limits)
	if cerr := e.End(); cerr != nil && err == nil {
		err = fmt.Errorf("%v: %w", cerr, ErrInfra)
	}
	if err != nil {
		return environments.Step{}, err
	}
	info["verifier_status"] = v.Status
	if v.Reason != "" {
		info["verifier_reason"] = v.Reason
	}
	if v.Status != agent.StatusUnsafePath {
		info["verifier_exit_code"] = v.ExitCode
		info["verifier_stdout"] = v.Stdout
		info["reward_components"] = v.Components
	}
	info["reward"] = v.Reward
	obs := note + fmt.Sprintf("verified: reward %g", v.Reward)
	if v.Reason != "" {
		obs += " (" + v.Reason + ")"
	}
	return environments.Step{Observation: obs, Reward: v.Reward, Done: true, Info: info}, nil
}

// End deletes the running episode's workspace.
func (e *Env) End() error {
	if e.ws == nil {
		return nil
	}
	err := e.ws.Close()
	e.ws = nil
	return err
}

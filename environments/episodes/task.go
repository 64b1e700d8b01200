package episodes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/policy"
)

// Version is the episodes code's version; it enters every episodes task's
// cache key: bump it when the rows written for the same inputs change.
// episodes-2: turns hold their reply's token ids and logprobs and a
// status (trajectories schema version 4).
const Version = "episodes-2"

// Maker makes a fresh environment for the episodes of one prompt
// (environments.Maker). It is called once per episode; the Env it returns
// runs that episode only.
type Maker = environments.Maker

// Options configure an episodes task.
type Options struct {
	// Policy acts in the episodes; it must be safe for concurrent use.
	Policy policy.Policy
	// Identity names the policy for the cache key and policy_version.
	Identity string
	// AdapterRoot and KeepAdapters are as in rollouts.Options.
	AdapterRoot  string
	KeepAdapters int
	// Adapters is as in rollouts.Options: the opened policy's shared
	// loader, when set.
	Adapters *policy.Adapters
	// EnvName names the environment in the cache key; Make makes it.
	EnvName string
	Make    Maker
	// Episodes is G, the episodes per prompt.
	Episodes int
	// Runner tunes each episode: sampling per turn (N must be 0 or 1),
	// the turn, token and wall-clock budgets, the system message. Its Seed is
	// the task call's; prompt logprobs are always asked for, so that
	// the episode's token sequence is exact.
	Runner environments.RunnerOptions
	// Concurrency is how many episodes run at once (default 4).
	Concurrency int
	// Env is the task environment (default "generate").
	Env string
	// Eval makes the task an evaluation's generate task (eval-generate):
	// its episodes are seeded with Runner.Seed, not the call's seed, so
	// every checkpoint plays the same draws of the environments'
	// randomness and of its own, and its groups are named by the call's
	// checkpoint parameter.
	Eval bool
}

// Task returns the generate stage that runs episodes: it reads the
// prompts input and, when present, the policy input (an adapter), runs
// Episodes episodes per prompt, and writes the trajectories table, one row
// per episode in (prompt, episode index) order.
func Task(o Options) (*pipeline.Task, error) {
	switch {
	case o.Policy == nil:
		return nil, errors.New("episodes: no policy")
	case o.Make == nil:
		return nil, fmt.Errorf("episodes: no environment maker for %q", o.EnvName)
	case o.Episodes < 1:
		return nil, fmt.Errorf("episodes: episodes per prompt must be at least 1, got %d", o.Episodes)
	}
	o.Runner.Sampling.PromptLogprobs, o.Runner.Sampling.Logprobs = true, true
	if _, err := environments.NewRunner(o.Policy, &o.Runner); err != nil {
		return nil, fmt.Errorf("episodes: %w", err)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Env == "" {
		o.Env = "generate"
	}
	g := &generator{o: o, src: policy.NewSource(o.Policy, o.Identity, o.Adapters, o.AdapterRoot, o.KeepAdapters)}
	v, err := g.version()
	if err != nil {
		return nil, err
	}
	name := "generate"
	if o.Eval {
		name = "eval-generate"
	}
	return pipeline.GenerateTask(name, v, o.Env, g.run), nil
}

type generator struct {
	o   Options
	src policy.Source
}

// version is the code, the policy, the environment and what shapes an
// episode, hashed.
func (g *generator) version() (string, error) {
	r := g.o.Runner
	s := r.Sampling
	s.Adapter = ""
	var evalSeed *int64 // an evaluation's own seed; a loop's is the call's
	if g.o.Eval {
		evalSeed = &r.Seed
	}
	v, err := pipeline.CodeDigest(Version, struct {
		Code, Identity, Env string
		Episodes, MaxTurns  int
		Timeout             time.Duration
		System              string
		Sampling            policy.Sampling
		EvalSeed            *int64 `json:",omitempty"`
		// Omitted when 0, so that tasks without a token budget keep the
		// versions they had before it existed.
		MaxEpisodeTokens int `json:",omitempty"`
		// "tempered" when the logprobs are of softmax(z/T), T ≠ 0, 1.
		Logprobs string `json:",omitempty"`
		// Token-in/token-out; omitted when off, keeping the versions of
		// before it existed.
		TokenIn bool `json:",omitempty"`
	}{Version, g.o.Identity, g.o.EnvName, g.o.Episodes, r.MaxTurns, r.Timeout, r.System, s, evalSeed, r.MaxEpisodeTokens, s.TemperedLogprobs(), r.Renderer != nil})
	if err != nil {
		return "", fmt.Errorf("episodes: version: %w", err)
	}
	return v, nil
}

// Params are the loop's parameters of a generate call, and an
// evaluation's (Checkpoint).
type Params struct {
	Iteration  int `json:"iteration"`
	Staleness  int `json:"staleness"`
	Checkpoint int `json:"checkpoint"`
}

func (g *generator) run(ctx context.Context, tc *pipeline.TaskContext) error {
	var p Params
	if err := tc.Params(&p); err != nil {
		return err
	}
	path := tc.InputPath(pipeline.OutPrompts)
	if path == "" {
		return pipeline.Permanent(errors.New("episodes: no prompts input"))
	}
	prompts, err := tables.ReadFile(path, tables.Prompts)
	if err != nil {
		return pipeline.Permanent(err)
	}
	ro := g.o.Runner
	if !g.o.Eval {
		ro.Seed = int64(tc.Seed)
	}
	ro.Logger = tc.Logger()
	group := p.Iteration
	if g.o.Eval {
		group = p.Checkpoint
	}
	cp, err := g.src.Checkpoint(ctx, tc.InputPath("policy"), ro.Sampling)
	if errors.Is(err, policy.ErrAdapterInput) {
		return pipeline.Permanent(err)
	}
	if err != nil {
		return err
	}
	ro.Sampling = cp.Sampling
	runner, err := environments.NewRunner(g.o.Policy, &ro)
	if err != nil {
		return pipeline.Permanent(err)
	}
	samplerJSON, err := cp.Sampler()
	if err != nil {
		return pipeline.Permanent(fmt.Errorf("episodes: %w", err))
	}
	G := g.o.Episodes
	rows := make([]tables.Trajectory, len(prompts)*G)
	// Every environment is made first, in order, so that one that cannot
	// be made fails the call the same way every time, before any episode.
	// Each one made is ended exactly once: by the runner when its episode
	// runs, or here when it never does (a later one could not be made,
	// the call was cancelled, an earlier episode failed the call).
	envs := make([]environments.Env, len(rows))
	defer func() { endUnrun(envs, tc.Logger()) }()
	for i, pr := range prompts {
		for j := 0; j < G; j++ {
			if envs[i*G+j], err = g.o.Make(pr); err != nil {
				return pipeline.Permanent(fmt.Errorf("episodes: environment %s for prompt %s: %w", g.o.EnvName, pr.PromptID, err))
			}
		}
	}
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(g.o.Concurrency)
	skipped := false
episodes:
	for i, pr := range prompts {
		for j := 0; j < G; j++ {
			if ectx.Err() != nil {
				skipped = true // the rest never run: endUnrun ends them
				break episodes
			}
			env := envs[i*G+j]
			envs[i*G+j] = nil // the runner ends it
			eg.Go(func() error {
				if err := ectx.Err(); err != nil { // failed or cancelled while it waited its turn
					endUnrun([]environments.Env{env}, tc.Logger())
					return err
				}
				ep := environments.Episode{ID: pr.PromptID, SampleIndex: int32(j), GroupID: fmt.Sprintf("%06d-%s", group, pr.PromptID)}
				res, err := runner.Run(ectx, env, ep)
				if err != nil {
					err = cp.Failed(err)
					if g.o.Eval {
						return fmt.Errorf("episodes of the evaluation of checkpoint %d: %w", p.Checkpoint, err)
					}
					return fmt.Errorf("episodes of iteration %d: %w", p.Iteration, err)
				}
				tr := res.Trajectory
				tr.Sampler, tr.Staleness = samplerJSON, int32(p.Staleness)
				if tr.PolicyVersion == "" {
					tr.PolicyVersion = g.o.Identity
				}
				rows[i*G+j] = tr
				return nil
			})
		}
	}
	if err := eg.Wait(); err != nil {
		return err
	}
	if skipped {
		return ctx.Err() // cancelled before every episode ran: no table
	}
	return tables.WriteFile(tc.OutputPath(pipeline.OutTrajectories), tables.Trajectories, rows, nil)
}

// endUnrun ends the environments that were made but never handed to the
// runner (nil entries were), in order; an End that fails is logged, as
// the runner logs its own.
func endUnrun(envs []environments.Env, log zerolog.Logger) {
	for _, env := range envs {
		if env == nil {
			continue
		}
		if err := env.End(); err != nil {
			log.Warn().Err(err).Msg("end an environment whose episode never ran")
		}
	}
}

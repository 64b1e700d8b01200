package episodes

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// NewKind returns kind: episodes, the generate stage that runs episodes
// of the RL environments of envs (its rl_env key names one)
// (docs/ROLLOUTS.md): the registry's Environments, so the program lists
// the environments its pipeline files may name once.
func NewKind(envs environments.RLEnvs) kind.Kind { return episodesKind{envs: envs} }

type episodesKind struct{ envs environments.RLEnvs }

func (episodesKind) Name() string      { return "episodes" }
func (episodesKind) Slots() []string   { return []string{pipeline.SlotGenerate} }
func (k episodesKind) New() kind.Stage { return &Stage{envs: k.envs} }

// Stage is an episodes stage's keys.
type Stage struct {
	// RLEnv names the RL environment (one of those the program
	// registered). Not env: every stage's env key names its task
	// environment (resources, retries), as for any stage.
	RLEnv string `yaml:"rl_env"`
	// RLOptions configure the environment (its RLEnv.Options keys).
	RLOptions map[string]any `yaml:"rl_options,omitempty"`
	// Episodes is G, the episodes per prompt.
	Episodes int `yaml:"episodes"`
	// MaxTurns is the turn budget (default 16).
	MaxTurns int `yaml:"max_turns,omitempty"`
	// Timeout is an episode's wall-clock budget (default none).
	Timeout time.Duration `yaml:"timeout,omitempty"`
	// MaxEpisodeTokens is an episode's token budget: the most tokens its
	// token sequence (prompts, observations and replies) may hold
	// (environments.RunnerOptions.MaxEpisodeTokens; default none). A
	// pointer, so that an explicit 0 is an error, not "none".
	MaxEpisodeTokens *int `yaml:"max_episode_tokens,omitempty"`
	// System is the transcript's first message, when set.
	System string `yaml:"system,omitempty"`
	// TokenIn runs the episodes token-in/token-out
	// (environments.RunnerOptions.Renderer): each turn continues the
	// episode's exact tokens, so a template that rewrites earlier turns
	// cannot leave it untrainable. It needs a policy whose model renders
	// turns in this process (the embedded model); default off.
	TokenIn bool `yaml:"token_in,omitempty"`
	// Concurrency is how many episodes run at once (default 4).
	Concurrency int       `yaml:"concurrency,omitempty"`
	Sampling    *Sampling `yaml:"sampling,omitempty"`

	envs environments.RLEnvs
	opts any // RLOptions decoded, by Check
}

// Sampling is how each turn's reply is sampled: the keys every stage
// that samples from the policy section takes.
type Sampling = kind.Sampling

// SamplesPolicy marks the stage as the policy section's user.
func (*Stage) SamplesPolicy() {}

// env is the environment rl_env names, nil for none.
func (s *Stage) env() environments.RLEnv {
	e, _ := s.envs.Lookup(s.RLEnv)
	return e
}

// Check checks the slot, the environment, the budgets and the sampling.
func (s *Stage) Check(c kind.Checker) {
	if !kind.OnlyIn(c, pipeline.SlotGenerate, "can run episodes") {
		return
	}
	if c.File().Policy == "" {
		c.Fail("", "add a policy section, e.g. policy: {kind: embedded, model: tiny-arith}", "%s: an episodes stage acts with the policy section, which is missing", c.Path(""))
	}
	names := strings.Join(s.envs.Names(), ", ")
	switch {
	case s.RLEnv == "":
		c.Fail("rl_env", "one of: "+names, "%s: an episodes stage needs rl_env, the RL environment to run", c.Path(""))
	case s.env() == nil:
		c.Fail("rl_env", "one of: "+names, "%s: no RL environment %q in this program", c.Path("rl_env"), s.RLEnv)
	default:
		opts, err := decodeOptions(s.env(), s.RLOptions)
		if err != nil {
			c.Fail("rl_options", "", "%s: rl_env %s: %v", c.Path("rl_options"), s.RLEnv, err)
		}
		s.opts = opts
	}
	switch {
	case s.Episodes < 1:
		c.Fail("episodes", "the group size G, e.g. 8", "%s: must be at least 1, got %d", c.Path("episodes"), s.Episodes)
	case s.MaxTurns < 0:
		c.Fail("max_turns", "", "%s: cannot be negative, got %d", c.Path("max_turns"), s.MaxTurns)
	case s.Timeout < 0:
		c.Fail("timeout", "", "%s: cannot be negative, got %v", c.Path("timeout"), s.Timeout)
	case s.MaxEpisodeTokens != nil && *s.MaxEpisodeTokens < 1:
		c.Fail("max_episode_tokens", "the most tokens an episode's sequence may hold, e.g. 4096; leave it out for no token budget", "%s: must be at least 1, got %d", c.Path("max_episode_tokens"), *s.MaxEpisodeTokens)
	case s.Concurrency < 0:
		c.Fail("concurrency", "", "%s: cannot be negative, got %d", c.Path("concurrency"), s.Concurrency)
	}
	if s.TokenIn && c.File().Policy != "embedded" {
		c.Fail("token_in", "drop token_in, or use a policy of kind embedded", "%s: token-in/token-out episodes need a policy whose model renders turns in this process; policy kind %s does not", c.Path("token_in"), c.File().Policy)
	}
	sp := s.Sampling
	if sp == nil {
		c.Fail("", "e.g. sampling: {temperature: 1.0, max_tokens: 8}", "%s: an episodes stage needs sampling (per turn)", c.Path(""))
		return
	}
	sp.Check(c, "the most tokens of one reply")
}

// Task runs the episodes with the opened policy.
func (s *Stage) Task(b kind.Build) (*pipeline.Task, error) {
	sp := s.Sampling.Policy()
	o, err := s.options(b)
	if err != nil {
		return nil, err
	}
	o.Episodes, o.Runner.Sampling = s.Episodes, sp
	t, err := Task(o)
	if err != nil {
		return nil, err
	}
	t.Version = b.Versioned(t.Version)
	return t, nil
}

// EvalGenerate is the eval section's generate task for this stage: the
// eval section's n episodes of the same environment per problem, each
// turn sampled with its temperature and max_tokens (and this stage's
// top_p and stop), seeded with its seed (kind.EvalGenerator). pass@k is
// then over episodes, scored by the reward stage.
func (s *Stage) EvalGenerate(e kind.Eval, b kind.Build) (*pipeline.Task, error) {
	o, err := s.options(b)
	if err != nil {
		return nil, err
	}
	sp := e.Sampling
	sp.N, sp.TopP, sp.Stop = 0, s.Sampling.TopP, s.Sampling.Stop
	o.Episodes, o.Runner.Sampling, o.Runner.Seed, o.Eval = e.Sampling.Samples(), sp, e.Seed, true
	if e.Policy != nil {
		o.Policy, o.Identity, o.AdapterRoot = e.Policy.Policy, e.Policy.Identity, e.Policy.AdapterRoot
	}
	t, err := Task(o)
	if err != nil {
		return nil, err
	}
	t.Version = b.Versioned(t.Version)
	return t, nil
}

// options opens the environment and fills what the loop's and the
// evaluation's tasks share.
func (s *Stage) options(b kind.Build) (Options, error) {
	env := s.env()
	if env == nil {
		return Options{}, kind.At("rl_env", fmt.Errorf("no RL environment %q in this program", s.RLEnv))
	}
	opts := s.opts
	if opts == nil && env.Options() != nil { // Task without Check: the defaults
		var err error
		if opts, err = decodeOptions(env, s.RLOptions); err != nil {
			return Options{}, kind.At("rl_options", err)
		}
	}
	mk, version, err := env.Open(opts, b.File.Dir)
	if err != nil {
		return Options{}, kind.At("rl_options", fmt.Errorf("rl_env %s: %w", s.RLEnv, err))
	}
	// The cache key names the environment, what it opened (its version)
	// and its options: other options are other work.
	name := s.RLEnv
	if version != "" {
		name += "@" + version
	}
	if opts != nil {
		js, err := json.Marshal(opts)
		if err != nil {
			return Options{}, kind.At("rl_options", fmt.Errorf("rl_env %s: %w", s.RLEnv, err))
		}
		name += string(js)
	}
	o := Options{EnvName: name, Make: mk, Concurrency: s.Concurrency, Env: b.Env,
		Runner: environments.RunnerOptions{MaxTurns: s.MaxTurns, Timeout: s.Timeout, System: s.System}}
	if s.MaxEpisodeTokens != nil {
		if *s.MaxEpisodeTokens < 1 { // Task without Check
			return Options{}, kind.At("max_episode_tokens", fmt.Errorf("must be at least 1, got %d", *s.MaxEpisodeTokens))
		}
		o.Runner.MaxEpisodeTokens = *s.MaxEpisodeTokens
	}
	if b.Policy != nil {
		o.Policy, o.Identity, o.AdapterRoot = b.Policy.Policy, b.Policy.Identity, b.Policy.AdapterRoot
		o.Adapters = b.Policy.Adapters()
	}
	if s.TokenIn {
		var r environments.Renderer
		if b.Policy != nil {
			r, _ = b.Policy.Model.(environments.Renderer)
		}
		if r == nil { // Task without Check
			return Options{}, kind.At("token_in", errors.New("the policy's model renders no turns in this process; drop token_in, or use a policy of kind embedded"))
		}
		o.Runner.Renderer = r
	}
	return o, nil
}

package environments_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/guess"
	"github.com/rlpipe/rlpipe/policy"
)

// bisect guesses the middle of what the transcript has not ruled out.
func bisect(msgs []policy.Message) string {
	lo, hi := 1, 100
	for i, m := range msgs {
		if m.Role != "assistant" || i+1 >= len(msgs) {
			continue
		}
		g, _ := strconv.Atoi(m.Content)
		switch msgs[i+1].Content {
		case guess.Higher:
			lo = g + 1
		case guess.Lower:
			hi = g - 1
		}
	}
	return strconv.Itoa((lo + hi) / 2)
}

func newRunner(t *testing.T, p policy.Policy, o *environments.RunnerOptions) *environments.Runner {
	t.Helper()
	r, err := environments.NewRunner(p, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRNGStable(t *testing.T) {
	if got := environments.Seed("guess-0001"); got != 0x11bc07fd24bbc6ca {
		t.Errorf("Seed = %#x", got)
	}
	a, b := environments.RNG("x"), environments.RNG("x")
	for range 10 {
		if a.Uint64() != b.Uint64() {
			t.Fatal("two RNGs of one id differ")
		}
	}
}

func TestGuessEpisodes(t *testing.T) {
	r := newRunner(t, environments.Scripted(bisect), &environments.RunnerOptions{MaxTurns: 10})
	for _, c := range []struct {
		id      string
		secret  int
		guesses []string
		reward  float64
	}{
		{"guess-0001", 41, []string{"50", "25", "37", "43", "40", "41"}, 0.75},
		{"guess-0002", 26, []string{"50", "25", "37", "31", "28", "26"}, 0.75},
		{"guess-0003", 43, []string{"50", "25", "37", "43"}, 0.85},
	} {
		t.Run(c.id, func(t *testing.T) {
			res, err := r.Run(context.Background(), guess.New(nil), environments.Episode{ID: c.id})
			if err != nil {
				t.Fatal(err)
			}
			tr := res.Trajectory
			guesses := replies(tr)
			if tr.Status != tables.StatusOK || tr.Error != nil || res.Info["secret"] != c.secret ||
				!reflect.DeepEqual(guesses, c.guesses) || res.Reward != c.reward {
				t.Fatalf("status %s, secret %v, guesses %q, reward %v; want ok, %d, %q, %v",
					tr.Status, res.Info["secret"], guesses, res.Reward, c.secret, c.guesses, c.reward)
			}
			last := tr.Turns[len(tr.Turns)-1]
			if last.Role != "user" || last.Content != guess.Correct || tr.Completion != guesses[len(guesses)-1] {
				t.Fatalf("last turn %+v, completion %q", last, tr.Completion)
			}
			if tr.PromptID != c.id || tr.GroupID != c.id || tr.PolicyVersion != environments.ScriptedVersion || tr.TokenIDs != nil {
				t.Fatalf("trajectory %+v", tr)
			}
			// The outcome in the environment is in the row, for rewards
			// and rescoring to read.
			want := fmt.Sprintf(`{"reward":%v,"info":{"replies":%d,"secret":%d}}`, c.reward, len(c.guesses), c.secret)
			if tr.EnvOutcome == nil || *tr.EnvOutcome != want {
				t.Fatalf("env_outcome %s, want %s", deref(tr.EnvOutcome), want)
			}
		})
	}
}

// Step info JSON cannot hold makes the episode an env_error saying so,
// and the row can still be written.
func TestOutcomeThatJSONCannotHold(t *testing.T) {
	env := &countingEnv{Env: guess.New(nil), step: func(context.Context, string) (environments.Step, error) {
		return environments.Step{Done: true, Reward: 1, Info: map[string]any{"score": math.NaN()}}, nil
	}}
	res, err := newRunner(t, environments.Scripted(bisect), nil).Run(context.Background(), env, environments.Episode{ID: "guess-0001"})
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Trajectory
	if tr.Status != tables.StatusEnvError || !strings.Contains(deref(tr.Error), "the environment's step info cannot be recorded as JSON: json: unsupported value: NaN") ||
		deref(tr.EnvOutcome) != `{"reward":1,"info":null}` {
		t.Fatalf("status %s, error %s, outcome %s", tr.Status, deref(tr.Error), deref(tr.EnvOutcome))
	}
	var buf bytes.Buffer
	if err := tables.Write(&buf, tables.Trajectories, []tables.Trajectory{tr}, nil); err != nil {
		t.Fatal(err)
	}
}

// A replay of an episode is identical, and a group of episodes sharing an
// id faces the same secret.
func TestReplay(t *testing.T) {
	r := newRunner(t, environments.Scripted(bisect), &environments.RunnerOptions{Seed: 3})
	run := func(sample int32) environments.Result {
		res, err := r.Run(context.Background(), guess.New(nil), environments.Episode{ID: "guess-0042", SampleIndex: sample, GroupID: "g"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b, c := run(0), run(0), run(1)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("replay differs:\n%+v\n%+v", a, b)
	}
	if c.Info["secret"] != a.Info["secret"] || c.Trajectory.Seed == a.Trajectory.Seed || c.Trajectory.GroupID != "g" {
		t.Fatalf("sample 1: secret %v (sample 0: %v), seed %d (sample 0: %d)", c.Info["secret"], a.Info["secret"], c.Trajectory.Seed, a.Trajectory.Seed)
	}
}

// countingEnv wraps an Env and counts End calls; step, when set, replaces
// Step.
type countingEnv struct {
	environments.Env
	ends atomic.Int32
	step func(ctx context.Context, action string) (environments.Step, error)
}

func (e *countingEnv) Step(ctx context.Context, action string) (environments.Step, error) {
	if e.step != nil {
		return e.step(ctx, action)
	}
	return e.Env.Step(ctx, action)
}

func (e *countingEnv) End() error {
	e.ends.Add(1)
	return e.Env.End()
}

// sleepy is a policy that takes d per reply, or until ctx ends.
type sleepy time.Duration

func (d sleepy) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Duration(d)):
	}
	return environments.Scripted(bisect).Generate(ctx, reqs, s)
}

// failing is a policy whose samples fail with a status.
type failing string

func (status failing) Generate(_ context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	return [][]policy.Sample{policy.ErrorSamples(reqs[0], 1, string(status), errors.New("server said 503"), "m1")}, nil
}

// tokens is a policy that returns the bytes of its replies as token ids,
// except on turn noTokensAt.
type tokens struct{ noTokensAt int }

func (p tokens) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	out, err := environments.Scripted(bisect).Generate(ctx, reqs, s)
	if err != nil {
		return nil, err
	}
	smp := &out[0][0]
	if strings.HasSuffix(reqs[0].ID, "/"+strconv.Itoa(p.noTokensAt)) {
		return out, nil
	}
	for _, c := range []byte(smp.Text) {
		smp.TokenIDs = append(smp.TokenIDs, int32(c))
		smp.Logprobs = append(smp.Logprobs, -0.5)
	}
	return out, nil
}

func TestEndings(t *testing.T) {
	stepErr := func(err error) func(context.Context, string) (environments.Step, error) {
		return func(context.Context, string) (environments.Step, error) { return environments.Step{}, err }
	}
	slowStep := func(ctx context.Context, _ string) (environments.Step, error) {
		<-ctx.Done()
		return environments.Step{}, fmt.Errorf("tool call: %w", ctx.Err())
	}
	for _, c := range []struct {
		name    string
		p       policy.Policy
		o       environments.RunnerOptions
		step    func(context.Context, string) (environments.Step, error)
		status  string
		reason  string
		replies int
	}{
		{"turn budget", environments.Scripted(func([]policy.Message) string { return "1" }),
			environments.RunnerOptions{MaxTurns: 3}, nil,
			tables.StatusTruncated, "turn budget of 3 turns spent before the episode ended", 3},
		{"wall-clock budget in the policy", sleepy(time.Hour),
			environments.RunnerOptions{Timeout: 50 * time.Millisecond}, nil,
			tables.StatusTimeout, "wall-clock budget of 50ms spent while the policy wrote turn 0", 0},
		{"wall-clock budget in the environment", environments.Scripted(bisect),
			environments.RunnerOptions{Timeout: 50 * time.Millisecond}, slowStep,
			tables.StatusTimeout, "wall-clock budget of 50ms spent during step 0 after 0 turns", 1},
		{"policy failure", failing(policy.StatusInfraError), environments.RunnerOptions{}, nil,
			tables.StatusInfraError, "policy failed at turn 0: server said 503", 0},
		{"environment error", environments.Scripted(bisect), environments.RunnerOptions{}, stepErr(errors.New("bad state")),
			tables.StatusEnvError, "step 0: bad state", 1},
		{"environment infrastructure", environments.Scripted(bisect), environments.RunnerOptions{},
			stepErr(fmt.Errorf("sandbox: %w", environments.ErrInfra)),
			tables.StatusInfraError, "step 0: sandbox: environment infrastructure failure", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := &countingEnv{Env: guess.New(nil), step: c.step}
			res, err := newRunner(t, c.p, &c.o).Run(context.Background(), env, environments.Episode{ID: "guess-0001"})
			if err != nil {
				t.Fatal(err)
			}
			tr := res.Trajectory
			if n := len(replies(tr)); tr.Status != c.status || tr.Error == nil || *tr.Error != c.reason || n != c.replies {
				t.Fatalf("status %q, error %v, %d replies; want %q, %q, %d", tr.Status, deref(tr.Error), n, c.status, c.reason, c.replies)
			}
			if n := env.ends.Load(); n != 1 {
				t.Fatalf("End called %d times, want 1", n)
			}
		})
	}
}

// replies are the contents of the assistant turns of tr, in order.
func replies(tr tables.Trajectory) []string {
	var out []string
	for _, turn := range tr.Turns {
		if turn.Role == "assistant" {
			out = append(out, turn.Content)
		}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	env := &countingEnv{Env: guess.New(nil)}
	_, err := newRunner(t, environments.Scripted(bisect), nil).Run(ctx, env, environments.Episode{ID: "x"})
	if !errors.Is(err, context.Canceled) || env.ends.Load() != 1 {
		t.Fatalf("Run = %v, %d End calls; want context.Canceled and 1", err, env.ends.Load())
	}
}

func TestTokensConcatenated(t *testing.T) {
	res, err := newRunner(t, tokens{noTokensAt: -1}, nil).Run(context.Background(), guess.New(nil), environments.Episode{ID: "guess-0001"})
	if err != nil {
		t.Fatal(err)
	}
	var want []int32
	var spans []int32
	for _, turn := range res.Trajectory.Turns {
		if turn.Role == "assistant" {
			for _, c := range []byte(turn.Content) {
				want = append(want, int32(c))
			}
			spans = append(spans, int32(len(turn.Content)))
		}
	}
	tr := res.Trajectory
	if !reflect.DeepEqual(tr.TokenIDs, want) || len(tr.Logprobs) != len(want) || tr.NumTokens != int32(len(want)) || !reflect.DeepEqual(res.TurnTokens, spans) {
		t.Fatalf("token ids %v (want %v), %d logprobs, spans %v (want %v)", tr.TokenIDs, want, len(tr.Logprobs), res.TurnTokens, spans)
	}
	// One reply without token ids: none are recorded.
	res, err = newRunner(t, tokens{noTokensAt: 1}, nil).Run(context.Background(), guess.New(nil), environments.Episode{ID: "guess-0001"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Trajectory.TokenIDs != nil || res.Trajectory.Logprobs != nil || res.TurnTokens != nil || res.Trajectory.NumTokens != 0 {
		t.Fatalf("token ids %v, logprobs %v with a reply lacking them", res.Trajectory.TokenIDs, res.Trajectory.Logprobs)
	}
}

func TestNewRunnerInvalid(t *testing.T) {
	for name, o := range map[string]environments.RunnerOptions{
		"group":       {Sampling: policy.Sampling{N: 4}},
		"temperature": {Sampling: policy.Sampling{Temperature: -1}},
		"turns":       {MaxTurns: -1},
	} {
		if _, err := environments.NewRunner(environments.Scripted(bisect), &o); err == nil {
			t.Errorf("%s: NewRunner accepted %+v", name, o)
		}
	}
}

// A temperature the sampler column cannot record fails NewRunner, rather
// than every trajectory carrying an empty sampler.
func TestNewRunnerNaNTemperature(t *testing.T) {
	_, err := environments.NewRunner(environments.Scripted(bisect), &environments.RunnerOptions{Sampling: policy.Sampling{Temperature: math.NaN()}})
	if want := "environments: sampling: temperature is NaN; it must be a number ≥ 0"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

// twoSamples breaks the policy contract: two samples for n=1.
type twoSamples struct{}

func (twoSamples) Generate(_ context.Context, reqs []policy.Request, _ policy.Sampling) ([][]policy.Sample, error) {
	s := policy.Sample{RequestID: reqs[0].ID, Text: "50", Status: policy.StatusOK}
	return [][]policy.Sample{{s, s}}, nil
}

// A policy that breaks the contract fails the call with an error that says
// how: the count of samples, not of groups.
func TestPolicyContractBroken(t *testing.T) {
	_, err := newRunner(t, twoSamples{}, nil).Run(context.Background(), guess.New(nil), environments.Episode{ID: "x"})
	if err == nil || !strings.Contains(err.Error(), "returned 2 samples for n=1") {
		t.Fatalf("Run = %v, want an error saying the policy returned 2 samples", err)
	}
}

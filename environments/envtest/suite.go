package envtest

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
)

// Suite is an RL environment and what the suite plays it with.
type Suite struct {
	Env environments.RLEnv
	// Options are rl_options decoded (nil: a fresh Env.Options(), the
	// defaults); Dir the pipeline file's directory.
	Options any
	Dir     string
	// Prompt is the problem every episode plays.
	Prompt tables.Prompt
	// Player returns a fresh player for an episode: the action for each
	// observation, the first one Reset's. Its actions must end the
	// episode within MaxSteps.
	Player func() func(observation string) string
	// MaxSteps bounds an episode (default 32).
	MaxSteps int
	// Bad is a malformed action (default "\x00 not an action").
	Bad string
}

// step is one step of a played episode, as the suite compares them.
type step struct {
	observation string
	reward      float64
	done        bool
}

// Run runs the suite's scenarios against s.Env.
func Run(t *testing.T, s Suite) {
	t.Helper()
	if s.Env == nil || s.Player == nil {
		t.Fatal("envtest: Suite.Env and Suite.Player are required")
	}
	if s.MaxSteps == 0 {
		s.MaxSteps = 32
	}
	if s.Bad == "" {
		s.Bad = "\x00 not an action"
	}
	ctx := context.Background()
	open := func(t *testing.T) (environments.Maker, string) {
		t.Helper()
		opts := s.Options
		if opts == nil {
			opts = s.Env.Options()
		}
		m, v, err := s.Env.Open(opts, s.Dir)
		if err != nil || m == nil {
			t.Fatalf("open %s: maker %v, %v", s.Env.Name(), m != nil, err)
		}
		return m, v
	}
	fresh := func(t *testing.T) environments.Env {
		t.Helper()
		m, _ := open(t)
		env, err := m(s.Prompt)
		if err != nil {
			t.Fatalf("make an environment for prompt %s: %v", s.Prompt.PromptID, err)
		}
		return env
	}
	play := func(t *testing.T, id string) []step {
		t.Helper()
		env := fresh(t)
		defer func() {
			if err := env.End(); err != nil {
				t.Errorf("End: %v", err)
			}
		}()
		obs, err := env.Reset(ctx, id)
		if err != nil {
			t.Fatalf("Reset(%q): %v", id, err)
		}
		player := s.Player()
		out := []step{{observation: obs}}
		for range s.MaxSteps {
			st, err := env.Step(ctx, player(obs))
			if err != nil {
				t.Fatalf("episode %s, step %d: %v", id, len(out), err)
			}
			if math.IsNaN(st.Reward) || math.IsInf(st.Reward, 0) {
				t.Fatalf("episode %s, step %d: reward %v", id, len(out), st.Reward)
			}
			out = append(out, step{st.Observation, st.Reward, st.Done})
			if st.Done {
				return out
			}
			obs = st.Observation
		}
		t.Fatalf("episode %s: not done after %d steps of the player", id, s.MaxSteps)
		return nil
	}

	t.Run("named", func(t *testing.T) {
		if n := s.Env.Name(); n == "" || strings.ContainsAny(n, " \t\n") {
			t.Errorf("name %q: want a non-empty word without spaces", n)
		}
	})
	t.Run("opens", func(t *testing.T) {
		_, a := open(t)
		_, b := open(t)
		if a != b {
			t.Errorf("versions %q, then %q, from the same options", a, b)
		}
	})
	t.Run("reset", func(t *testing.T) {
		env := fresh(t)
		obs, err := env.Reset(ctx, "envtest-reset")
		if err != nil || obs == "" {
			t.Fatalf("Reset: %q, %v; want a first observation", obs, err)
		}
		if err := env.End(); err != nil {
			t.Errorf("End: %v", err)
		}
	})
	t.Run("episode ends", func(t *testing.T) {
		for _, id := range []string{"envtest-a", "envtest-b", "envtest-c"} {
			play(t, id)
		}
	})
	t.Run("deterministic by seed", func(t *testing.T) {
		for _, id := range []string{"envtest-a", "envtest-b"} {
			a, b := play(t, id), play(t, id)
			if len(a) != len(b) {
				t.Fatalf("episode %s: %d steps, then %d", id, len(a), len(b))
			}
			for i := range a {
				if a[i] != b[i] {
					t.Errorf("episode %s, step %d: %+v, then %+v", id, i, a[i], b[i])
				}
			}
		}
	})
	t.Run("malformed action", func(t *testing.T) {
		env := fresh(t)
		if _, err := env.Reset(ctx, "envtest-bad"); err != nil {
			t.Fatal(err)
		}
		st, err := env.Step(ctx, s.Bad)
		if err != nil {
			t.Fatalf("Step(%q): %v; a malformed action is answered, not an error", s.Bad, err)
		}
		if st.Observation == "" && !st.Done {
			t.Errorf("Step(%q): %+v; want an observation that says what is wrong, or the episode's end", s.Bad, st)
		}
		if err := env.End(); err != nil {
			t.Errorf("End: %v", err)
		}
	})
	t.Run("end", func(t *testing.T) {
		env := fresh(t)
		if err := env.End(); err != nil {
			t.Errorf("End without an episode: %v", err)
		}
		if _, err := env.Reset(ctx, "envtest-end"); err != nil {
			t.Fatal(err)
		}
		if err := env.End(); err != nil {
			t.Errorf("End: %v", err)
		}
		if err := env.End(); err != nil {
			t.Errorf("End twice: %v", err)
		}
	})
}

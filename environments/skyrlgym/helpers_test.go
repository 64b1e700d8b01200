package skyrlgym_test

import (
	"context"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/skyrlgym"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
)

// python is the project venv's interpreter, which has skyrl-gym; every
// test names it the same way, so they share one worker per setup.
func python(t *testing.T) string {
	t.Helper()
	return pyvenv.Py.Python(t, "run skyrl-gym's environments")
}

// open opens skyrl_gym with o (its python set) from dir and fails fast.
func open(t *testing.T, o skyrlgym.Options, dir string) environments.Maker {
	t.Helper()
	o.Python = python(t)
	m, _, err := skyrlgym.RLEnv.Open(&o, dir)
	if err != nil {
		t.Fatalf("open skyrl_gym %s: %v", o.EnvClass, err)
	}
	return m
}

// reset makes and resets an env of p.
func reset(t *testing.T, m environments.Maker, p tables.Prompt) (environments.Env, string) {
	t.Helper()
	env, err := m(p)
	if err != nil {
		t.Fatalf("make an env for %s: %v", p.PromptID, err)
	}
	obs, err := env.Reset(context.Background(), p.PromptID)
	if err != nil {
		t.Fatalf("reset %s: %v", p.PromptID, err)
	}
	return env, obs
}

// step is one step's outcome, as tests compare them.
type step struct {
	Observation string
	Reward      float64
	Done        bool
}

// play steps env through actions and returns what each led to.
func play(t *testing.T, env environments.Env, actions ...string) []step {
	t.Helper()
	var out []step
	for _, a := range actions {
		st, err := env.Step(context.Background(), a)
		if err != nil {
			t.Fatalf("step %q: %v", a, err)
		}
		out = append(out, step{st.Observation, st.Reward, st.Done})
	}
	return out
}

func ptr[T any](v T) *T { return &v }

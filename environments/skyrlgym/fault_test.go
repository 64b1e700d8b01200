package skyrlgym_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/skyrlgym"
	"github.com/rlpipe/rlpipe/policy"
)

// faulty opens testdata/faulty.py's Faulty class (a worker of its own:
// its setup has the class's directory) and returns its maker and worker.
func faulty(t *testing.T, o skyrlgym.Options) (environments.Maker, *skyrlgym.Worker) {
	t.Helper()
	o.EnvClass = "faulty.py:Faulty"
	m := open(t, o, "testdata")
	o.Python = python(t)
	w, err := skyrlgym.WorkerOf(&o, "testdata")
	if err != nil {
		t.Fatal(err)
	}
	return m, w
}

// runOne runs one episode of a fresh env through the runner, the policy
// replying the actions in turn.
func runOne(t *testing.T, m environments.Maker, id string, timeout time.Duration, actions ...string) environments.Result {
	t.Helper()
	i := 0
	p := environments.Scripted(func([]policy.Message) string {
		i++
		return actions[min(i, len(actions))-1]
	})
	r, err := environments.NewRunner(p, &environments.RunnerOptions{MaxTurns: 5, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	env, err := m(tables.Prompt{PromptID: id, Prompt: "go"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background(), env, environments.Episode{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func errorOf(r environments.Result) string {
	if r.Trajectory.Error == nil {
		return ""
	}
	return *r.Trajectory.Error
}

// A worker that crashes, hangs or writes garbage mid-episode: that
// episode is env_error (or timeout), an episode whose env was in the same
// process is infra_error, the worker restarts and the next episodes go
// on. Prints of the env never reach the protocol stream; a non-finite
// reward and an exception are the episode's env_error, and the worker
// lives on.
func TestFaults(t *testing.T) {
	t.Parallel() // a worker of its own: its process starts overlap the others'
	m, w := faulty(t, skyrlgym.Options{})
	ctx := context.Background()

	// What kills the worker. The crash has a bystander: an episode under
	// way in the same process, whose env dies with it.
	for _, c := range []struct {
		name, action string
		timeout      time.Duration
		status       string
		error        string
		bystander    bool
	}{
		{"crash", "crash", 0, tables.StatusEnvError,
			"step 0: skyrl_gym env faulty:Faulty for prompt e: step: the process ended: exit status 3: the skyrl_gym worker ended during this episode's request; it restarts for the next one", true},
		{"hang", "hang", time.Second, tables.StatusTimeout, "wall-clock budget of 1s spent during step 0 after 0 turns", false},
		{"garbage on the protocol stream", "garbage", 0, tables.StatusEnvError,
			`step 0: skyrl_gym env faulty:Faulty for prompt e: step: the process wrote "garbage" on the protocol stream, not a reply (an environment must print to stdout or stderr, never to the worker's protocol fd): the skyrl_gym worker ended during this episode's request; it restarts for the next one`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			starts := w.Starts()
			var bystander environments.Env
			if c.bystander {
				var obs string
				bystander, obs = reset(t, m, tables.Prompt{PromptID: "bystander", Prompt: "go"})
				defer bystander.End()
				if obs != "faulty\n\ngo" {
					t.Errorf("first observation %q: want the messages' contents joined by a blank line", obs)
				}
			}
			res := runOne(t, m, "e", c.timeout, c.action)
			if res.Status() != c.status || errorOf(res) != c.error {
				t.Errorf("status %s, error\n%s\nwant %s,\n%s", res.Status(), errorOf(res), c.status, c.error)
			}
			if bystander != nil {
				_, err := bystander.Step(ctx, "ok")
				want := "skyrl_gym env faulty:Faulty for prompt bystander: step: its worker ended since the episode began: the episode's skyrl_gym env was lost with its worker: environment infrastructure failure"
				if !errors.Is(err, skyrlgym.ErrLost) || !errors.Is(err, environments.ErrInfra) || err.Error() != want {
					t.Errorf("the bystander's step: %v\nwant\n%s", err, want)
				}
			}
			if res := runOne(t, m, "next", 0, "ok"); res.Status() != tables.StatusOK || res.Reward != 1 {
				t.Errorf("the next episode: %s (%s), reward %v; want ok, 1", res.Status(), errorOf(res), res.Reward)
			}
			if got := w.Starts(); got != starts+1 {
				t.Errorf("%d starts, then %d; want one restart", starts, got)
			}
		})
	}

	// What does not kill the worker.
	starts := w.Starts()
	for _, c := range []struct {
		name    string
		actions []string
		status  string
		error   string
		rewards []float64
		info    map[string]any
	}{
		{"prints kept off the protocol stream", []string{"noisy", "wait", "ok"}, tables.StatusOK, "",
			[]float64{0, 0, 1}, map[string]any{"turn": float64(3)}},
		{"non-finite reward", []string{"nan"}, tables.StatusEnvError,
			"step 0: skyrl_gym env faulty:Faulty for prompt e: step: non-finite reward nan: skyrl_gym env returned a non-finite reward", nil, nil},
		{"the env raises", []string{"wait", "raise"}, tables.StatusEnvError,
			"step 1: skyrl_gym env faulty:Faulty for prompt e: step raised RuntimeError: the env broke on purpose", []float64{0}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := runOne(t, m, "e", 0, c.actions...)
			if res.Status() != c.status || errorOf(res) != c.error {
				t.Errorf("status %s, error %q; want %s, %q", res.Status(), errorOf(res), c.status, c.error)
			}
			if !equalFloats(res.StepRewards, c.rewards) {
				t.Errorf("step rewards %v, want %v", res.StepRewards, c.rewards)
			}
			if c.info != nil && res.Info["turn"] != c.info["turn"] {
				t.Errorf("info %v, want %v", res.Info, c.info)
			}
		})
	}
	if got := w.Starts(); got != starts {
		t.Errorf("%d starts, then %d; want no restart", starts, got)
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Bad options, an unknown env_class, a python without skyrl-gym and a
// row without the extras its env needs fail before any episode, each
// saying what to do.
func TestBadInput(t *testing.T) {
	py := python(t)
	for _, c := range []struct {
		name string
		o    skyrlgym.Options
		want string
		is   error
	}{
		{"no env_class", skyrlgym.Options{Python: py},
			"env_class is missing: add rl_options: {env_class: gsm8k} (a registered skyrl_gym env, or module:Class or path/to/file.py:Class of your own): bad skyrl_gym options", skyrlgym.ErrOptions},
		{"unknown env_class", skyrlgym.Options{EnvClass: "gsm9k", Python: py},
			"env_class gsm9k: skyrl_gym registers no such env (it has aime, gsm8k, gsm8k_multi_turn, lcb, search, searchcode, text2sql); a class of your own is module:Class or path/to/file.py:Class: unknown skyrl_gym env class: bad skyrl_gym options", skyrlgym.ErrUnknownClass},
		{"a module that does not import", skyrlgym.Options{EnvClass: "nomodule:Env", Python: py},
			"env_class nomodule:Env: ModuleNotFoundError: No module named 'nomodule'; a class of your own is module:Class (importable by the python) or path/to/file.py:Class (relative to the pipeline file): unknown skyrl_gym env class: bad skyrl_gym options", skyrlgym.ErrUnknownClass},
		{"a class the file lacks", skyrlgym.Options{EnvClass: "faulty.py:Nope", Python: py},
			"env_class faulty:Nope: AttributeError: module 'faulty' has no attribute 'Nope'; a class of your own is module:Class (importable by the python) or path/to/file.py:Class (relative to the pipeline file): unknown skyrl_gym env class: bad skyrl_gym options", skyrlgym.ErrUnknownClass},
		{"no class file", skyrlgym.Options{EnvClass: "missing.py:Env", Python: py},
			"env_class missing.py:Env: read the class file (relative paths are taken from the pipeline file's directory): open testdata/missing.py: no such file or directory: bad skyrl_gym options", skyrlgym.ErrOptions},
		{"a bad class reference", skyrlgym.Options{EnvClass: "a:b:c", Python: py},
			`env_class "a:b:c": want a registered env id, module:Class or path/to/file.py:Class: bad skyrl_gym options`, skyrlgym.ErrOptions},
		{"a negative timeout", skyrlgym.Options{EnvClass: "gsm8k", Python: py, RequestTimeoutS: -1},
			"request_timeout_s is -1: want seconds above 0, or leave it out for 5m0s: bad skyrl_gym options", skyrlgym.ErrOptions},
		{"a negative memory", skyrlgym.Options{EnvClass: "gsm8k", Python: py, MemoryMB: -5},
			"memory_mb is -5: want MiB above 0, or leave it out for 4096: bad skyrl_gym options", skyrlgym.ErrOptions},
		{"db_path not a path", skyrlgym.Options{EnvClass: "text2sql", Python: py, EnvConfig: map[string]any{"db_path": 3}},
			"env_config.db_path is 3: want a directory (relative to the pipeline file): bad skyrl_gym options", skyrlgym.ErrOptions},
		{"no such python", skyrlgym.Options{EnvClass: "gsm8k", Python: "/nonexistent/venv"},
			"start the skyrl_gym worker (python /nonexistent/venv): python /nonexistent/venv: no such venv or interpreter; set python: to a venv directory or an interpreter's path: python interpreter not usable: the skyrl_gym worker did not start: environment infrastructure failure", skyrlgym.ErrStart},
		{"a python without skyrl-gym", skyrlgym.Options{EnvClass: "gsm8k", Python: "/usr/bin/python3"},
			"start the skyrl_gym worker (python /usr/bin/python3): the process ended: exit status 1 (stderr: ModuleNotFoundError: No module named 'skyrl_gym'); set python: to a venv with skyrl-gym (the project's .venv-py has it): the skyrl_gym worker did not start: environment infrastructure failure", skyrlgym.ErrStart},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.o.Python == "/usr/bin/python3" {
				if _, err := os.Stat(c.o.Python); err != nil {
					t.Skip("no /usr/bin/python3 here")
				}
			}
			_, _, err := skyrlgym.RLEnv.Open(&c.o, "testdata")
			if err == nil || err.Error() != c.want || !errors.Is(err, c.is) {
				t.Errorf("open: %v\nwant\n%s", err, c.want)
			}
		})
	}

	t.Run("missing extras", func(t *testing.T) {
		m := open(t, skyrlgym.Options{EnvClass: "gsm8k_multi_turn"}, t.TempDir())
		for _, c := range []struct {
			name string
			p    tables.Prompt
			want string
		}{
			{"no max_turns", tables.Prompt{PromptID: "row-7", Prompt: "q", Answer: "1"},
				`skyrl_gym env gsm8k_multi_turn for prompt row-7: make raised KeyError: 'extra_info'; the env reads a key the row lacks: put it in the row's metadata (reward_spec, extra_info, max_turns, db_id, data, …; docs/ROLLOUTS.md, "SkyRL-gym")`},
			{"no answer", tables.Prompt{PromptID: "row-8", Prompt: "q", Metadata: `{"max_turns": 2}`},
				`skyrl_gym env gsm8k_multi_turn for prompt row-8: make raised AssertionError: reward_spec.ground_truth is required; the env reads a key the row lacks: put it in the row's metadata (reward_spec, extra_info, max_turns, db_id, data, …; docs/ROLLOUTS.md, "SkyRL-gym")`},
			{"metadata not an object", tables.Prompt{PromptID: "row-9", Prompt: "q", Metadata: `[1]`},
				"prompt row-9: its metadata is not a JSON object (json: cannot unmarshal array into Go value of type map[string]interface {}); a skyrl_gym env takes its extras from it: prompt row does not make a skyrl_gym env"},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := m(c.p)
				if err == nil || err.Error() != c.want || !errors.Is(err, skyrlgym.ErrRow) {
					t.Errorf("make: %v\nwant\n%s", err, c.want)
				}
			})
		}
	})
}

// A request past request_timeout_s kills the worker even when the
// episode has no wall-clock budget: the episode is env_error, and the
// worker restarts for the next one.
func TestRequestTimeout(t *testing.T) {
	t.Parallel() // a worker of its own: its process starts overlap the others'
	m, w := faulty(t, skyrlgym.Options{RequestTimeoutS: 1})
	starts := w.Starts()
	res := runOne(t, m, "e", 0, "hang")
	want := "step 0: skyrl_gym env faulty:Faulty for prompt e: step: no answer within the request timeout of 1s: the skyrl_gym worker ended during this episode's request; it restarts for the next one"
	if res.Status() != tables.StatusEnvError || errorOf(res) != want {
		t.Errorf("status %s, error\n%s\nwant env_error,\n%s", res.Status(), errorOf(res), want)
	}
	if res := runOne(t, m, "next", 0, "ok"); res.Status() != tables.StatusOK || w.Starts() != starts+1 {
		t.Errorf("the next episode: %s (%s) after %d starts; want ok after one restart", res.Status(), errorOf(res), w.Starts()-starts)
	}
}

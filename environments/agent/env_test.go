package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/sandbox"
)

// script replies with the given messages in turn, then "DONE".
func script(replies ...string) environments.Scripted {
	return func(msgs []policy.Message) string {
		n := 0
		for _, m := range msgs {
			if m.Role == "assistant" {
				n++
			}
		}
		if n < len(replies) {
			return replies[n]
		}
		return "DONE"
	}
}

var fixTask = agent.Task{
	Instruction: "Make greet.sh print 'hello world'.",
	Run:         "bash greet.sh",
	Verifier:    `test "$(cat /candidate/stdout)" = "hello world"`,
}

func greetWorld(t testing.TB) *agent.World {
	t.Helper()
	_, w := cachedWorld(t, agent.WorldSpec{Name: "greet",
		Files: map[string][]byte{"greet.sh": []byte("echo hello wrld\n")}})
	return w
}

func newEnv(t testing.TB, w *agent.World, o *agent.Options) *agent.Env {
	t.Helper()
	env, err := agent.NewEnv(w, fixTask, o)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestAgentEpisode(t *testing.T) {
	w := greetWorld(t)
	before := digest(t, w.Dir)
	fix := "I will fix the typo.\n```bash\nsed -i 's/wrld/world/' greet.sh\ncat greet.sh\n```"
	r, err := environments.NewRunner(script(fix), &environments.RunnerOptions{MaxTurns: 5})
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv(t, w, nil)
	var root string
	probe := &probeEnv{Env: env, afterReset: func() { root = env.Workspace().Root() }}
	res, err := r.Run(context.Background(), probe, environments.Episode{ID: "greet-1"})
	if err != nil {
		t.Fatal(err)
	}
	toolCalls := `[{"tool":"bash","command":"sed -i 's/wrld/world/' greet.sh\ncat greet.sh"}]`
	want := []tables.Turn{
		{Role: "user", Content: "Make greet.sh print 'hello world'.\n\n" + agent.FormatHelp, Status: tables.StatusOK},
		{Role: "assistant", Content: fix, ToolCalls: &toolCalls, Status: tables.StatusOK},
		{Role: "user", Content: "exit status 0 (ok)\nstdout:\necho hello world\nstderr:\n(empty)", Status: tables.StatusOK},
		{Role: "assistant", Content: "DONE", Status: tables.StatusOK},
		{Role: "user", Content: "verified: reward 1", Status: tables.StatusOK},
	}
	tr := res.Trajectory
	if tr.Status != tables.StatusOK || res.Reward != 1 || !reflect.DeepEqual(res.StepRewards, []float64{0, 1}) {
		t.Fatalf("status %s (%s), reward %v, step rewards %v", tr.Status, deref(tr.Error), res.Reward, res.StepRewards)
	}
	if !reflect.DeepEqual(tr.Turns, want) {
		t.Fatalf("turns\n got %s\nwant %s", turnsString(tr.Turns), turnsString(want))
	}
	wantMode := "copy"
	if os.Geteuid() == 0 {
		wantMode = "overlay"
	}
	if res.Info["workspace_mode"] != wantMode || res.Info["verifier_exit_code"] != 0 || res.Info["verifier_status"] != "ok" || res.Info["tool_calls"] != 1 ||
		res.Info["run_status"] != "ok" || res.Info["run_exit_code"] != 0 {
		t.Fatalf("info %v", res.Info)
	}
	if v, ok := env.Verdict(); !ok || v.Reward != 1 || !v.Result.Passed() {
		t.Fatalf("verdict %+v, %v", v, ok)
	}
	if env.Workspace() != nil {
		t.Fatal("the workspace outlived the episode")
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("workspace %s still exists: %v", root, err)
	}
	if digest(t, w.Dir) != before {
		t.Fatal("the episode changed the cached world")
	}
}

// probeEnv calls afterReset after each Reset.
type probeEnv struct {
	*agent.Env
	afterReset func()
}

func (p *probeEnv) Reset(ctx context.Context, id string) (string, error) {
	obs, err := p.Env.Reset(ctx, id)
	if err == nil {
		p.afterReset()
	}
	return obs, err
}

func turnsString(ts []tables.Turn) string {
	var b strings.Builder
	for _, t := range ts {
		b.WriteString("\n  " + t.Role + ": " + t.Content)
		if t.ToolCalls != nil {
			b.WriteString(" [" + *t.ToolCalls + "]")
		}
	}
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestAgentBudgets(t *testing.T) {
	w := greetWorld(t)
	loop := environments.Scripted(func([]policy.Message) string { return "```bash\ntrue\n```" })
	sleep := environments.Scripted(func([]policy.Message) string { return "```bash\nsleep 20\n```" })
	for _, c := range []struct {
		name   string
		p      policy.Policy
		o      environments.RunnerOptions
		status string
		reason string
	}{
		{"turn budget", loop, environments.RunnerOptions{MaxTurns: 3}, tables.StatusTruncated,
			"turn budget of 3 turns spent before the episode ended"},
		{"wall-clock budget", sleep, environments.RunnerOptions{Timeout: 500 * time.Millisecond}, tables.StatusTimeout,
			"wall-clock budget of 500ms spent during step 0 after 0 turns"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := environments.NewRunner(c.p, &c.o)
			if err != nil {
				t.Fatal(err)
			}
			env := newEnv(t, w, nil)
			var root string
			res, err := r.Run(context.Background(), &probeEnv{Env: env, afterReset: func() { root = env.Workspace().Root() }},
				environments.Episode{ID: "budget"})
			if err != nil {
				t.Fatal(err)
			}
			if tr := res.Trajectory; tr.Status != c.status || deref(tr.Error) != c.reason {
				t.Fatalf("status %s (%s), want %s (%s)", tr.Status, deref(tr.Error), c.status, c.reason)
			}
			if _, err := os.Stat(root); !os.IsNotExist(err) {
				t.Fatalf("workspace %s still exists: %v", root, err)
			}
		})
	}
}

// The verifier's reward is its verdict, else its exit status; never its
// stdout.
func TestVerifierReward(t *testing.T) {
	w := greetWorld(t)
	const want = "; want pass, fail (each optionally followed by \": reason\"), a number or \"reward: X\""
	for _, c := range []struct {
		name, verifier string
		limits         sandbox.Limits
		reward         float64
		status, reason string
	}{
		{"no verdict, exit 0", "true", sandbox.Limits{}, 1, "ok", ""},
		{"no verdict, exit 3", "exit 3", sandbox.Limits{}, 0, "failed", "the verifier wrote no verdict and exited 3"},
		{"pass", `echo pass > "$RLPIPE_VERDICT"`, sandbox.Limits{}, 1, "ok", ""},
		{"pass with a reason, exit 1", `echo 'PASS: 3 of 3' > "$RLPIPE_VERDICT"; exit 1`, sandbox.Limits{}, 1, "failed", "3 of 3"},
		{"fail", `echo 'fail: got 4, want 5' > "$RLPIPE_VERDICT"`, sandbox.Limits{}, 0, "ok", "got 4, want 5"},
		{"number", `echo 0.25 > "$RLPIPE_VERDICT"`, sandbox.Limits{}, 0.25, "ok", ""},
		{"reward: X", `echo 'reward: 0.75' > "$RLPIPE_VERDICT"`, sandbox.Limits{}, 0.75, "ok", ""},
		{"reward=X", `printf reward=0.5 > "$RLPIPE_VERDICT"; exit 2`, sandbox.Limits{}, 0.5, "failed", ""},
		{"garbage", `echo garbage > "$RLPIPE_VERDICT"`, sandbox.Limits{}, 0, "bad_verdict",
			`the verifier wrote "garbage\n" to $RLPIPE_VERDICT` + want},
		{"nan", `echo nan > "$RLPIPE_VERDICT"`, sandbox.Limits{}, 0, "bad_verdict", `the verifier wrote "nan\n" to $RLPIPE_VERDICT` + want},
		{"two verdicts", `echo pass > "$RLPIPE_VERDICT"; echo fail > "$RLPIPE_VERDICT"`, sandbox.Limits{}, 0, "bad_verdict",
			`the verifier wrote "pass\nfail\n" to $RLPIPE_VERDICT` + want},
		{"an empty line", `echo > "$RLPIPE_VERDICT"`, sandbox.Limits{}, 0, "bad_verdict", `the verifier wrote "\n" to $RLPIPE_VERDICT` + want},
		{"stdout is not read, exit 0", "echo reward: 0.25", sandbox.Limits{}, 1, "ok", ""},
		{"stdout is not read, exit 1", "echo reward: 1; exit 1", sandbox.Limits{}, 0, "failed", "the verifier wrote no verdict and exited 1"},
		{"pass, then stopped by a limit", `echo pass > "$RLPIPE_VERDICT"; while :; do :; done`, sandbox.Limits{CPUTime: time.Second}, 0, "timeout",
			"the verifier was stopped (timeout) before it finished"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env, err := agent.NewEnv(w, agent.Task{Instruction: "x", Verifier: c.verifier}, &agent.Options{Limits: c.limits})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := env.Reset(ctx, "v"); err != nil {
				t.Fatal(err)
			}
			st, err := env.Step(ctx, "DONE")
			if err != nil || !st.Done || st.Reward != c.reward || st.Observation != fmt.Sprintf("verified: reward %g", c.reward) {
				t.Fatalf("Step = %+v, %v; want done with reward %v", st, err, c.reward)
			}
			v, _ := env.Verdict()
			if v.Reward != c.reward || v.Status != c.status || v.Reason != c.reason || st.Info["verifier_status"] != c.status {
				t.Fatalf("verdict %v, %q, %q (info %v); want %v, %q, %q", v.Reward, v.Status, v.Reason, st.Info, c.reward, c.status, c.reason)
			}
			if r, ok := st.Info["verifier_reason"]; (c.reason == "") != !ok || (ok && r != c.reason) {
				t.Errorf("info verifier_reason %q (%v), want %q", r, ok, c.reason)
			}
			if got, ok := st.Info["verifier_verdict"]; ok != (v.Result.Verdict != "") || (ok && got != v.Result.Verdict) {
				t.Errorf("info verifier_verdict %q (%v), verdict %q", got, ok, v.Result.Verdict)
			}
			if _, ok := st.Info["run_status"]; ok {
				t.Errorf("run_status without a Run: %v", st.Info)
			}
		})
	}
}

func TestParseVerdict(t *testing.T) {
	for _, c := range []struct {
		in     string
		reward float64
		reason string
		ok     bool
	}{
		{"pass", 1, "", true},
		{" Pass \n", 1, "", true},
		{"pass: all 3", 1, "all 3", true},
		{"fail wrong sum", 0, "wrong sum", true},
		{"FAIL:", 0, "", true},
		{"0.5", 0.5, "", true},
		{"-2", -2, "", true},
		{"reward: 0.125", 0.125, "", true},
		{"reward = 1", 1, "", true},
		{"", 0, "", false},
		{"passed", 0, "", false},
		{"reward", 0, "", false},
		{"reward: x", 0, "", false},
		{"reward 1", 0, "", false},
		{"0.5 points", 0, "", false},
		{"inf", 0, "", false},
		{"reward: NaN", 0, "", false},
		{"pass\nfail", 0, "", false},
		{"yes", 0, "", false},
	} {
		reward, reason, ok := agent.ParseVerdict(c.in)
		if reward != c.reward || reason != c.reason || ok != c.ok {
			t.Errorf("ParseVerdict(%q) = %v, %q, %v; want %v, %q, %v", c.in, reward, reason, ok, c.reward, c.reason, c.ok)
		}
	}
}

func TestStepObservations(t *testing.T) {
	w := greetWorld(t)
	env := newEnv(t, w, &agent.Options{ObservationBytes: 16, Limits: sandbox.Limits{CPUTime: time.Second}})
	ctx := context.Background()
	if _, err := env.Reset(ctx, "obs"); err != nil {
		t.Fatal(err)
	}
	defer env.End()
	for _, c := range []struct{ action, obs string }{
		{"```bash\necho hi; echo oops >&2; exit 3\n```", "exit status 3 (failed)\nstdout:\nhi\nstderr:\noops"},
		{"```bash\nseq 1 20\n```", "exit status 0 (ok)\nstdout:\n1\n2\n3\n4\n\n[… 35 bytes cut …]\n8\n19\n20\nstderr:\n(empty)"},
		{"```bash\nwhile :; do :; done\n```", "exit status 152 (timeout: the command ran out of time)\nstdout:\n(empty)\nstderr:\n(empty)"},
		{"```bash\necho never", "the ```bash block is not closed with a ``` line; nothing was run."},
		{"```bash\nprintf 'a\\0b'\n```", "exit status 0 (ok)\nstdout:\na\x00b\nstderr:\n(empty)"},
	} {
		st, err := env.Step(ctx, c.action)
		if err != nil || st.Done || st.Observation != c.obs {
			t.Errorf("Step(%q) = %q, %v\nwant %q", c.action, st.Observation, err, c.obs)
		}
	}
}

// A clipped stream keeps its head and tail whole characters, and keeps
// bytes that are not UTF-8 (binary output) instead of dropping them.
func TestObservationClip(t *testing.T) {
	for _, c := range []struct{ name, stdout, want string }{
		{"binary", "\xff0123456789abcdefghijklmnopqrstuv", "\xff0123456\n[… 17 bytes cut …]\nopqrstuv"},
		{"split character", "0123456é89abcdefghijklmnopqrstuv", "0123456\n[… 18 bytes cut …]\nopqrstuv"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := agent.Observation(sandbox.Result{Status: sandbox.StatusOK, Stdout: c.stdout}, 16)
			want := "exit status 0 (ok)\nstdout:\n" + c.want + "\nstderr:\n(empty)"
			if got != want {
				t.Errorf("Observation = %q\nwant %q", got, want)
			}
		})
	}
}

func TestParseToolCall(t *testing.T) {
	for _, c := range []struct {
		name, msg string
		cmd       string
		ok        bool
		err       error
	}{
		{"bash block", "Let me look.\n```bash\nls -la\n```\nthen more", "ls -la", true, nil},
		{"sh, indented, CRLF", "  ```sh\r\n  echo a\r\n  ```\r\n", "  echo a", true, nil},
		{"first of two", "```bash\none\n```\n```bash\ntwo\n```", "one", true, nil},
		{"other language skipped", "```python\nprint(1)\n```\n```Shell\necho 2\n```", "echo 2", true, nil},
		{"empty block", "```bash\n```", "", true, nil},
		{"final answer", "All done: the tests pass.", "", false, nil},
		{"inline code is not a call", "I ran `ls` before.", "", false, nil},
		{"unclosed", "```bash\nrm -rf", "", false, agent.ErrUnclosedBlock},
	} {
		t.Run(c.name, func(t *testing.T) {
			call, ok, err := agent.ParseToolCall(c.msg)
			if call.Command != c.cmd || ok != c.ok || !errors.Is(err, c.err) || (ok && call.Tool != "bash") {
				t.Fatalf("ParseToolCall = %+v, %v, %v; want %q, %v, %v", call, ok, err, c.cmd, c.ok, c.err)
			}
		})
	}
}

func FuzzParseToolCall(f *testing.F) {
	f.Add("```bash\nls\n```")
	f.Add("```\n```bash\n")
	f.Add("text")
	f.Fuzz(func(t *testing.T, msg string) {
		call, ok, err := agent.ParseToolCall(msg)
		if ok && (err != nil || !strings.Contains(strings.ReplaceAll(msg, "\r", ""), strings.ReplaceAll(call.Command, "\r", ""))) {
			t.Fatalf("ParseToolCall(%q) = %+v, %v", msg, call, err)
		}
	})
}

func TestWorldCache(t *testing.T) {
	ctx := context.Background()
	c, err := agent.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var builds atomic.Int32
	spec := agent.WorldSpec{Name: "gen", Files: map[string][]byte{"README": []byte("hi\n")}, Version: "v1",
		Build: func(ctx context.Context, dir string) error {
			builds.Add(1)
			return os.WriteFile(filepath.Join(dir, "data.txt"), []byte("generated\n"), 0o644)
		}}
	// Concurrent requests build once.
	var wg sync.WaitGroup
	worlds := make([]*agent.World, 4)
	errs := make([]error, 4)
	for i := range worlds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worlds[i], errs[i] = c.World(ctx, spec)
		}()
	}
	wg.Wait()
	built := 0
	for i, w := range worlds {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if w.Dir != worlds[0].Dir || w.Digest != worlds[0].Digest {
			t.Fatalf("world %d at %s, world 0 at %s", i, w.Dir, worlds[0].Dir)
		}
		if w.Built {
			built++
		}
	}
	if builds.Load() != 1 || built != 1 {
		t.Fatalf("%d builds, %d worlds say built; want 1", builds.Load(), built)
	}
	if b, err := os.ReadFile(filepath.Join(worlds[0].Dir, "data.txt")); err != nil || string(b) != "generated\n" {
		t.Fatalf("data.txt: %q, %v", b, err)
	}
	// A changed definition is a new world; an unchanged one is not rebuilt.
	spec2 := spec
	spec2.Version = "v2"
	w2, err := c.World(ctx, spec2)
	if err != nil || !w2.Built || w2.Digest == worlds[0].Digest || builds.Load() != 2 {
		t.Fatalf("v2: %+v, %v, %d builds", w2, err, builds.Load())
	}
	if w, _ := c.World(ctx, spec); w.Built || builds.Load() != 2 {
		t.Fatal("v1 was rebuilt")
	}
	// A failed build leaves nothing.
	bad := agent.WorldSpec{Name: "bad", Version: "1", Build: func(context.Context, string) error { return errors.New("no disk") }}
	if _, err := c.World(ctx, bad); err == nil || !strings.Contains(err.Error(), `build world "bad": no disk`) {
		t.Fatalf("bad build: %v", err)
	}
	entries, _ := os.ReadDir(c.Dir())
	if len(entries) != 2 {
		t.Fatalf("cache holds %d entries, want the 2 worlds", len(entries))
	}
}

func TestWorldFromSource(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "pkg", "main.go"), []byte("package main\n"), 0o644)
	os.Symlink("pkg/main.go", filepath.Join(src, "link"))
	c, err := agent.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w1, err := c.World(ctx, agent.WorldSpec{Name: "src", Source: src})
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, w1.Dir) != digest(t, src) {
		t.Fatal("the world is not a copy of its source")
	}
	os.WriteFile(filepath.Join(src, "pkg", "main.go"), []byte("package main // changed\n"), 0o644)
	w2, err := c.World(ctx, agent.WorldSpec{Name: "src", Source: src})
	if err != nil || !w2.Built || w2.Digest == w1.Digest {
		t.Fatalf("after a source change: %+v, %v", w2, err)
	}
}

func TestInvalid(t *testing.T) {
	ctx := context.Background()
	c, w := newWorld(t)
	for name, spec := range map[string]agent.WorldSpec{
		"empty":              {Name: "e"},
		"build, no version":  {Name: "b", Build: func(context.Context, string) error { return nil }},
		"version, no build":  {Name: "v", Version: "1", Files: worldFiles},
		"file outside":       {Name: "f", Files: map[string][]byte{"../x": nil}},
		"file not clean":     {Name: "f", Files: map[string][]byte{"a//b": nil}},
		"file absolute path": {Name: "f", Files: map[string][]byte{"/etc/x": nil}},
	} {
		if _, err := c.World(ctx, spec); !errors.Is(err, agent.ErrInvalid) {
			t.Errorf("%s: World = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := agent.NewEnv(w, agent.Task{Instruction: "x"}, nil); !errors.Is(err, agent.ErrInvalid) {
		t.Errorf("NewEnv without a verifier = %v", err)
	}
	if _, err := w.NewWorkspace(ctx, &agent.WorkspaceOptions{Mode: "zfs"}); !errors.Is(err, agent.ErrInvalid) {
		t.Errorf("mode zfs: %v", err)
	}
	if os.Geteuid() == 0 {
		if _, err := w.NewWorkspace(ctx, &agent.WorkspaceOptions{ScratchDir: t.TempDir()}); !errors.Is(err, agent.ErrInvalid) ||
			!strings.Contains(err.Error(), "needs o+x") {
			t.Errorf("scratch dir unreachable by nobody: %v", err)
		}
	}
}

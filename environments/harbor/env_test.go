package harbor_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/environments/envtest"
	"github.com/rlpipe/rlpipe/environments/harbor"
	"github.com/rlpipe/rlpipe/sandbox"
)

// Each task's solution/solve.sh, run as the agent's one tool call, scores
// 1; doing nothing scores 0. word-stats' reward.json components win over
// the 0.5 its test.sh also writes to reward.txt.
func TestSolutionAndNothing(t *testing.T) {
	for _, c := range []struct {
		task       string
		solved     map[string]float64
		nothing    map[string]float64
		solveCalls int
	}{
		{"add-numbers", map[string]float64{"reward": 1}, map[string]float64{"reward": 0}, 1},
		{"word-stats", map[string]float64{"lines": 1, "words": 1}, map[string]float64{"lines": 0, "words": 0}, 1},
	} {
		t.Run(c.task, func(t *testing.T) {
			tk, err := harbor.Load(task(c.task))
			if err != nil {
				t.Fatal(err)
			}
			for _, run := range []struct {
				name   string
				script []string
				reward float64
				comps  map[string]float64
			}{{"solution", []string{tk.Solution}, 1, c.solved}, {"nothing", nil, 0, c.nothing}} {
				st, err := play(t, task(c.task), run.script...)
				if err != nil {
					t.Fatalf("%s: %v", run.name, err)
				}
				if !st.Done || st.Reward != run.reward {
					t.Fatalf("%s: %+v, want done with reward %g", run.name, st, run.reward)
				}
				got, _ := st.Info["reward_components"].(map[string]float64)
				if len(got) != len(run.comps) {
					t.Fatalf("%s: components %v, want %v", run.name, got, run.comps)
				}
				for k, v := range run.comps {
					if got[k] != v {
						t.Errorf("%s: component %s = %g, want %g", run.name, k, got[k], v)
					}
				}
				if st.Info["verifier_status"] != "ok" {
					t.Errorf("%s: verifier_status %v, want ok", run.name, st.Info["verifier_status"])
				}
			}
		})
	}
}

// The shared environment suite, with solve.sh as the player.
func TestEnvSuite(t *testing.T) {
	tk, err := harbor.Load(task("add-numbers"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := harbor.Prompts([]*harbor.Task{tk}, filepath.Join("testdata", "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	envtest.Run(t, envtest.Suite{
		Env:     harbor.RLEnv,
		Options: &harbor.PipelineOptions{Tasks: "tasks", WorldCache: cacheDir},
		Dir:     "testdata",
		Prompt:  rows[0],
		Player: func() func(string) string {
			n := 0
			return func(string) string {
				n++
				if n == 1 {
					return bash(tk.Solution)
				}
				return "done"
			}
		},
	})
}

// A test.sh that writes no reward file, writes NaN or a string, or
// outlives [verifier] timeout_sec leaves the episode without a reward:
// an error naming the task and the file, never a 0.
func TestVerifierFaults(t *testing.T) {
	for _, c := range []struct{ task, want string }{
		{"no-reward", "verify harbor task faults/no-reward: tests/test.sh wrote no reward file: want /logs/verifier/reward.txt (one number) or /logs/verifier/reward.json: harbor task: no reward"},
		{"nan-reward", `verify harbor task faults/nan-reward: tests/test.sh wrote "NaN" to /logs/verifier/reward.txt: want a finite number: harbor task: no reward`},
		{"string-reward", `verify harbor task faults/string-reward: tests/test.sh wrote /logs/verifier/reward.json with "reward" = "1": want a finite number: harbor task: no reward`},
		{"slow-verifier", "verify harbor task faults/slow-verifier: tests/test.sh timed out after 1s (task.toml [verifier] timeout_sec): the episode has no reward: harbor task: no reward"},
	} {
		t.Run(c.task, func(t *testing.T) {
			_, err := play(t, fault(c.task))
			if !errors.Is(err, harbor.ErrReward) || err.Error() != c.want {
				t.Fatalf("got %v\nwant %s (ErrReward)", err, c.want)
			}
		})
	}
}

// What the agent does to reach or fool the verifier: the tests are not
// in its world; a symlink out of the world (absolute, "..", /proc) or a
// FIFO in place of the answer scores 0 without running the verifier; a
// fake cat, bash or pytest on the task's own PATH and dotfiles do not
// reach the verifier, which runs with the host's PATH.
func TestAgentCannotReachVerifier(t *testing.T) {
	dir := t.TempDir()
	pathTask := filepath.Join(dir, "path-task")
	if err := os.CopyFS(pathTask, os.DirFS(task("add-numbers"))); err != nil {
		t.Fatal(err)
	}
	df := filepath.Join(pathTask, "environment", "Dockerfile")
	if err := os.WriteFile(df, []byte("FROM ubuntu:24.04\nWORKDIR /app\nENV PATH=/app/bin:$PATH\nRUN mkdir -p /app/bin && printf '17 25\\n' > /app/input.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(pathTask, "tests", "test.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	unsafe := func(what string) string {
		return "the verifier did not run: app/answer.txt is " + what + "; a verifier opens only regular files, directories and links that stay in the workspace"
	}
	for _, c := range []struct {
		name, dir, script string
		reason            string
	}{
		{"symlink to the tests", task("add-numbers"), "ln -s /tests/test.sh /app/answer.txt", unsafe("a symlink to /tests/test.sh, out of the workspace")},
		{"relative symlink out", task("add-numbers"), "ln -s ../tests/expected /app/answer.txt", unsafe("a symlink to ../tests/expected, out of the workspace")},
		{"proc magic link", task("add-numbers"), "ln -s /proc/self/root/logs/verifier/reward.txt /app/answer.txt",
			unsafe("a symlink to /proc/self/root/logs/verifier/reward.txt, out of the workspace")},
		{"fifo", task("add-numbers"), "mkfifo /app/answer.txt", unsafe("a named pipe (FIFO)")},
		{"fake tools on the task's PATH", pathTask, `echo 41 > /app/answer.txt
for tool in cat bash pytest '['; do printf '#!/bin/sh\necho 1 > /logs/verifier/reward.txt; echo 42\n' > "/app/bin/$tool"; chmod +x "/app/bin/$tool"; done
printf 'echo 1 > /logs/verifier/reward.txt\n' | tee /root/.bashrc /root/.profile /app/.bashrc > /dev/null
command -v cat`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := play(t, c.dir, c.script)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Done || st.Reward != 0 {
				t.Fatalf("%+v, want done with reward 0", st)
			}
			if c.reason != "" && (st.Info["verifier_status"] != agent.StatusUnsafePath || st.Info["verifier_reason"] != c.reason) {
				t.Fatalf("verifier %v: %v\nwant %s: %s", st.Info["verifier_status"], st.Info["verifier_reason"], agent.StatusUnsafePath, c.reason)
			}
			if c.reason == "" && st.Info["verifier_status"] != "ok" {
				t.Fatalf("verifier_status %v, want ok (the verifier ran and scored 0)", st.Info["verifier_status"])
			}
		})
	}
	// The workspace's root is not in the agent's sandbox: it cannot put a
	// link where /app is bound, and /work is a tmpfs of its own.
	t.Run("the world's root is out of reach", func(t *testing.T) {
		st, err := play(t, task("add-numbers"), "rm -rf /work/app; ln -s /etc /work/app; ls -A /work; echo 42 > /app/answer.txt",
			"ls /app > /tmp/ls.txt; cat /tmp/ls.txt")
		if err != nil {
			t.Fatal(err)
		}
		if !st.Done || st.Reward != 1 {
			t.Fatalf("%+v, want the answer in the world's /app, reward 1", st)
		}
	})
	t.Run("tests are not in the agent's world", func(t *testing.T) {
		tk, world, tests := openTask(t, task("add-numbers"))
		env, err := harbor.NewEnv(tk, world, tests, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer env.End()
		if _, err := env.Reset(context.Background(), "peek"); err != nil {
			t.Fatal(err)
		}
		st, err := env.Step(context.Background(), bash("cat /tests/test.sh; ls /logs; cat /app/input.txt"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"cat: /tests/test.sh: No such file or directory", "ls: cannot access '/logs': No such file or directory", "17 25"} {
			if !strings.Contains(st.Observation, want) {
				t.Errorf("observation %q, want it to say %q", st.Observation, want)
			}
		}
	})
}

// [agent] timeout_sec ends the episode: the tool call that outlives it is
// stopped, and the verifier judges what is there.
func TestAgentTimeout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "quick")
	if err := os.CopyFS(dir, os.DirFS(task("add-numbers"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "task.toml"), []byte("[task]\nname = \"rlpipe/quick\"\n\n[agent]\ntimeout_sec = 1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "tests", "test.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := play(t, dir, "echo 42 > /app/answer.txt; sleep 20")
	if err != nil {
		t.Fatal(err)
	}
	want := "the agent's time is up (task.toml [agent] timeout_sec 1s); verified: reward 1"
	if !st.Done || st.Reward != 1 || st.Info["agent_timeout"] != true || !strings.HasSuffix(st.Observation, want) {
		t.Fatalf("%+v\nwant done, reward 1 (the answer was written before the timeout), observation ending %q", st, want)
	}
}

// Prompts and the RLEnv's maker agree on the task a row names.
func TestPromptsAndMaker(t *testing.T) {
	tasks, refused, err := harbor.LoadDir(filepath.Join("testdata", "tasks"))
	if len(refused) != 0 {
		t.Fatalf("refused %v", refused)
	}
	if err != nil {
		t.Fatal(err)
	}
	rows, err := harbor.Prompts(tasks, filepath.Join("testdata", "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].PromptID != "rlpipe/add-numbers" || rows[1].Metadata != `{"harbor_task":"rlpipe/word-stats","path":"word-stats"}` ||
		rows[0].Prompt != "Read the two integers in /app/input.txt and write their sum to /app/answer.txt.\n" {
		t.Fatalf("rows %+v", rows)
	}
	mk, _, err := harbor.RLEnv.Open(&harbor.PipelineOptions{Tasks: "tasks", WorldCache: cacheDir}, "testdata")
	if err != nil {
		t.Fatal(err)
	}
	_, err = mk(tables.Prompt{PromptID: "rlpipe/none"})
	want := "prompt rlpipe/none: no harbor task \"rlpipe/none\" in testdata/tasks (make the prompts with rlpipe dataset harbor tasks)"
	if err == nil || err.Error() != want {
		t.Fatalf("maker: %v, want %s", err, want)
	}
	if _, _, err := harbor.RLEnv.Open(&harbor.PipelineOptions{}, "testdata"); err == nil ||
		err.Error() != "tasks is missing: add rl_options: {tasks: DIR}, the directory of Harbor tasks" {
		t.Fatalf("no tasks: %v", err)
	}
}

// copyTask copies the task name into a temporary directory with test.sh
// replaced by script, and returns the copy's directory.
func copyTask(t *testing.T, name, script string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dir, os.DirFS(task(name))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tests", "test.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// verifier_stdout is the end of test.sh's output, where a test runner
// prints its summary, even past the first 64 KiB.
func TestVerifierStdoutIsTheEnd(t *testing.T) {
	dir := copyTask(t, "add-numbers", "#!/bin/bash\nhead -c 70000 /dev/zero | tr '\\0' a\nprintf 'END OF OUTPUT\\n'\necho 1 > /logs/verifier/reward.txt\n")
	st, err := play(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("a", 2048-len("END OF OUTPUT\n")) + "END OF OUTPUT\n"
	if got, _ := st.Info["verifier_stdout"].(string); got != want {
		t.Fatalf("verifier_stdout is %d bytes ending %q, want %d ending %q", len(got), got[max(0, len(got)-20):], len(want), want[len(want)-20:])
	}
}

// test.sh runs the agent's code, which must not fill the host's disk
// through /logs/verifier: it is a tmpfs of the sandbox's FileBytes in
// all, so files each under the per-file limit stop at "No space left on
// device"; where mounting is refused, a total past FileBytes after the
// run leaves the episode without a reward.
func TestVerifierLogsBounded(t *testing.T) {
	fill := "#!/bin/bash\nfor i in 1 2 3; do\n" +
		"  head -c 600000 /dev/zero > /logs/verifier/fill$i || { rm -f /logs/verifier/fill*; echo 0 > /logs/verifier/reward.txt; exit 0; }\n" +
		"done\necho 1 > /logs/verifier/reward.txt\n"
	dir := copyTask(t, "add-numbers", fill)
	tk, world, tests := openTask(t, dir)
	verify := func(t *testing.T) (harbor.Verdict, error) {
		t.Helper()
		ws, err := world.NewWorkspace(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		return harbor.Verify(context.Background(), tk, world, tests, ws.Root(), sandbox.Limits{FileBytes: 1 << 20})
	}
	t.Run("a tmpfs", func(t *testing.T) {
		v, err := verify(t)
		if err != nil {
			t.Fatal(err)
		}
		// The second file did not fit (a host directory would have taken
		// all three: reward 1); head's complaint did not fit either, as
		// test-stdout.txt is on the same tmpfs.
		if v.Reward != 0 || len(v.Components) != 1 || v.Components["reward"] != 0 || v.Status != "ok" || v.Stdout != "" {
			t.Fatalf("%+v, want reward 0 from reward.txt, status ok, no stdout", v)
		}
	})
	t.Run("mounting refused", func(t *testing.T) {
		harbor.RefuseLogsMount(t)
		_, err := verify(t)
		want := "verify harbor task rlpipe/add-numbers: tests/test.sh wrote 1800002 bytes to /logs/verifier, more than the 1048576 allowed (the sandbox's FileBytes): the episode has no reward: harbor task: no reward"
		if !errors.Is(err, harbor.ErrReward) || err == nil || err.Error() != want {
			t.Fatalf("got %v\nwant %s (ErrReward)", err, want)
		}
	})
}

package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/agent"
)

// addWorld is a project with a bug in lib/add.sh and a test script that
// prints what add gives; the test and its data are the task's.
func addWorld(t testing.TB) *agent.World {
	t.Helper()
	_, w := cachedWorld(t, agent.WorldSpec{Name: "add", Version: "1",
		Files: map[string][]byte{
			"lib/add.sh":         []byte("add() { echo $(( $1 - $2 )); }\n"),
			"tests/run.sh":       []byte("source lib/add.sh\nwhile read -r a b; do add \"$a\" \"$b\"; done < tests/cases.txt\n"),
			"tests/cases.txt":    []byte("2 3\n-1 1\n"),
			"tests/expected.txt": []byte("5\n0\n"),
		},
		// A symlink into the protected tests, and a file, for the
		// validation of protected paths.
		Build: func(ctx context.Context, dir string) error {
			return os.Symlink("tests", filepath.Join(dir, "link"))
		}})
	return w
}

// addTask is the safe shape: the tests are protected, Run executes them,
// and the verifier compares their output with an answer only it sees.
var addTask = agent.Task{
	Instruction: "Fix lib/add.sh so that bash tests/run.sh prints the sums.",
	Protected:   []string{"tests"},
	Run:         "bash tests/run.sh",
	Checks:      map[string][]byte{"expected.txt": []byte("5\n0\n")},
	Verifier:    `cmp -s /candidate/stdout /check/expected.txt`,
}

const fixAdd = "```bash\nsed -i 's/ - / + /' lib/add.sh\n```"

// episode runs the tool calls of actions in a fresh episode of task, then
// answers; it returns the observations of the calls, the last step and
// the verdict.
func episode(t *testing.T, w *agent.World, task agent.Task, actions ...string) ([]string, environments.Step, agent.Verdict) {
	t.Helper()
	return episodeIn(t, w, agent.ModeAuto, task, actions...)
}

func episodeIn(t *testing.T, w *agent.World, mode agent.Mode, task agent.Task, actions ...string) ([]string, environments.Step, agent.Verdict) {
	t.Helper()
	env, err := agent.NewEnv(w, task, &agent.Options{Workspace: agent.WorkspaceOptions{Mode: mode}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := env.Reset(ctx, "hack"); err != nil {
		t.Fatal(err)
	}
	var obs []string
	for _, a := range actions {
		st, err := env.Step(ctx, a)
		if err != nil || st.Done {
			t.Fatalf("Step(%q) = %+v, %v", a, st, err)
		}
		obs = append(obs, st.Observation)
	}
	st, err := env.Step(ctx, "Done.")
	if err != nil || !st.Done {
		t.Fatalf("final answer: %+v, %v", st, err)
	}
	v, ok := env.Verdict()
	if !ok {
		t.Fatal("no verdict")
	}
	return obs, st, v
}

func TestHonestEpisodePasses(t *testing.T) {
	w := addWorld(t)
	_, st, v := episode(t, w, addTask, fixAdd)
	if st.Reward != 1 || v.Status != "ok" || v.Run == nil || v.Run.Stdout != "5\n0\n" || st.Info["run_status"] != "ok" || st.Info["run_exit_code"] != 0 {
		t.Fatalf("reward %v, verdict %+v, info %v", st.Reward, v, st.Info)
	}
	_, st, _ = episode(t, w, addTask)
	if st.Reward != 0 || st.Info["verifier_status"] != "failed" {
		t.Fatalf("without the fix: reward %v, info %v", st.Reward, st.Info)
	}
}

// Every change to a protected path scores 0 before anything runs, and
// names the path; the hacks would pass the verifier otherwise.
func TestProtectedPathsTampered(t *testing.T) {
	w := addWorld(t)
	for _, c := range []struct {
		name, hack string
		protected  []string
		tampered   []string
		reason     string
	}{
		{"test script rewritten", `printf 'echo 5; echo 0\n' > tests/run.sh`, nil,
			[]string{"tests/run.sh"}, "tests/run.sh (changed)"},
		{"test data rewritten", `echo '2 -2' > tests/cases.txt`, nil,
			[]string{"tests/cases.txt"}, "tests/cases.txt (changed)"},
		{"test script removed", `rm tests/run.sh && printf 'echo 5; echo 0\n' > run.sh`, nil,
			[]string{"tests/run.sh"}, "tests/run.sh (removed)"},
		{"file added under a protected directory", `echo 'exit 0' > tests/conftest.sh`, nil,
			[]string{"tests/conftest.sh"}, "tests/conftest.sh (added)"},
		{"permissions changed", `chmod 0777 tests/run.sh`, nil,
			[]string{"tests/run.sh"}, "tests/run.sh (changed)"},
		{"protected directory removed", `rm -r tests`, nil,
			[]string{"tests"}, "tests (removed)"},
		{"directory replaced by a symlink", `mv tests t && ln -s t tests`, nil,
			[]string{"tests", "tests/cases.txt", "tests/expected.txt", "tests/run.sh"},
			"tests (changed), tests/cases.txt (removed), tests/expected.txt (removed), tests/run.sh (removed)"},
		{"parent of a protected file replaced by a symlink", `mv tests t && ln -s t tests`, []string{"tests/run.sh"},
			[]string{"tests/run.sh"}, "tests/run.sh (removed)"},
		{"file replaced by a symlink", `mv tests/run.sh r.sh && ln -s ../r.sh tests/run.sh`, nil,
			[]string{"tests/run.sh"}, "tests/run.sh (changed)"},
		{"changed and restored: not tampering", `cp tests/run.sh x && echo x > tests/run.sh && cp -p x tests/run.sh && rm x`, nil,
			nil, ""},
	} {
		for _, mode := range modes {
			t.Run(modeName(mode)+"/"+c.name, func(t *testing.T) {
				task := addTask
				if c.protected != nil {
					task.Protected = c.protected
				}
				obs, st, v := episodeIn(t, w, mode, task, fixAdd, "```bash\n"+c.hack+"\n```")
				if obs[1] != "exit status 0 (ok)\nstdout:\n(empty)\nstderr:\n(empty)" {
					t.Fatalf("the hack failed: %s", obs[1])
				}
				if c.tampered == nil {
					if st.Reward != 1 || v.Status != "ok" || v.Tampered != nil {
						t.Fatalf("reward %v, verdict %+v", st.Reward, v)
					}
					return
				}
				reason := "the episode changed protected paths: " + c.reason
				if st.Reward != 0 || v.Reward != 0 || v.Status != agent.StatusTampered || v.Reason != reason || !reflect.DeepEqual(v.Tampered, c.tampered) {
					t.Fatalf("reward %v, verdict %v %q %q %q; want 0, tampered, %q, %q", st.Reward, v.Reward, v.Status, v.Reason, v.Tampered, reason, c.tampered)
				}
				if st.Info["verifier_status"] != "tampered" || !reflect.DeepEqual(st.Info["tampered"], c.tampered) || st.Info["verifier_reason"] != reason {
					t.Fatalf("info %v", st.Info)
				}
				if st.Observation != "verified: reward 0 ("+reason+")" {
					t.Fatalf("observation %q", st.Observation)
				}
				// Nothing ran: neither the Run phase nor the verifier.
				if v.Run != nil || v.Result.Status != "" {
					t.Fatalf("ran after tampering: run %+v, verifier %+v", v.Run, v.Result)
				}
				for _, k := range []string{"verifier_exit_code", "verifier_stdout", "run_status", "run_exit_code"} {
					if _, ok := st.Info[k]; ok {
						t.Errorf("info %s is set: %v", k, st.Info)
					}
				}
			})
		}
	}
}

// Code run in the Run phase cannot change what the verifier compares with
// either: protected paths are compared again after it.
func TestProtectedPathsTamperedByRun(t *testing.T) {
	w := addWorld(t)
	task := addTask
	// A verifier that compares with a protected file of the workspace.
	task.Checks, task.Verifier = nil, `cmp -s /candidate/stdout tests/expected.txt`
	hack := "```bash\ncat > lib/add.sh <<'EOF'\necho 9 > tests/expected.txt\nadd() { echo 9; }\nEOF\n```"
	_, st, v := episode(t, w, task, hack)
	reason := "the run phase changed protected paths: tests/expected.txt (changed)"
	if st.Reward != 0 || v.Status != agent.StatusTampered || v.Reason != reason || !reflect.DeepEqual(v.Tampered, []string{"tests/expected.txt"}) {
		t.Fatalf("reward %v, verdict %+v", st.Reward, v)
	}
	if v.Run == nil || v.Run.Stdout != "9\n9\n" || st.Info["run_status"] != "ok" || v.Result.Status != "" {
		t.Fatalf("run %+v, verifier %+v", v.Run, v.Result)
	}
}

// The agent's program, run by the Run phase, prints "reward: 1" and tries
// every way to write a verdict; none reaches the verifier's.
func TestRunCannotForgeTheVerdict(t *testing.T) {
	w := addWorld(t)
	forge := "```bash\ncat > lib/add.sh <<'EOF'\n" +
		"echo 'reward: 1'\n" +
		"echo pass > \"$RLPIPE_VERDICT\" || echo \"no verdict channel: ${RLPIPE_VERDICT-unset}\" >&2\n" +
		"for fd in $(ls /proc/$$/fd); do [ \"$fd\" -gt 2 ] && echo pass 2>/dev/null >&$fd; done\n" +
		"ls /check >&2\n" +
		"add() { echo $(( $1 - $2 )); }\n" +
		"EOF\n```"
	for _, c := range []struct {
		name, verifier, status, reason string
	}{
		{"exit status", `cat /candidate/stdout; cmp -s /candidate/stdout /check/expected.txt`, "failed",
			"the verifier wrote no verdict and exited 1"},
		{"verdict channel", `cat /candidate/stdout
			if cmp -s /candidate/stdout /check/expected.txt; then echo pass; else echo 'fail: wrong sums'; fi > "$RLPIPE_VERDICT"`,
			"ok", "wrong sums"},
	} {
		t.Run(c.name, func(t *testing.T) {
			task := addTask
			task.Verifier = c.verifier
			_, st, v := episode(t, w, task, forge)
			if st.Reward != 0 || v.Status != c.status || v.Reason != c.reason {
				t.Fatalf("reward %v, status %q, reason %q; want 0, %q, %q (verdict %q, run %+v)",
					st.Reward, v.Status, v.Reason, c.status, c.reason, v.Result.Verdict, v.Run)
			}
			// What the program printed reached the verifier, and its stdout,
			// as text only.
			if v.Run.Stdout != "reward: 1\n-1\n-2\n" || st.Info["verifier_stdout"] != v.Run.Stdout {
				t.Fatalf("run stdout %q, verifier stdout %q", v.Run.Stdout, st.Info["verifier_stdout"])
			}
			wantErr := "lib/add.sh: line 2: : No such file or directory\nno verdict channel: unset\nls: cannot access '/check': No such file or directory\n"
			if v.Run.Stderr != wantErr {
				t.Fatalf("run stderr %q, want %q", v.Run.Stderr, wantErr)
			}
		})
	}
}

// The unsafe shape the Run phase exists for: a verifier that runs the
// workspace's code itself hands it the verdict channel and the checks. The
// same forger passes there, and fails the safe shape.
func TestVerifierRunningWorkspaceCodeIsUnsafe(t *testing.T) {
	w := addWorld(t)
	forge := "```bash\ncat > lib/add.sh <<'EOF'\n" +
		"cat /check/expected.txt 2>/dev/null\n" +
		"echo pass 2>/dev/null > \"$RLPIPE_VERDICT\"\n" +
		"add() { :; }\n" +
		"EOF\n```"
	unsafe := addTask
	unsafe.Run, unsafe.Verifier = "", `bash tests/run.sh > /tmp/out.txt && cmp -s /tmp/out.txt /check/expected.txt`
	if _, st, v := episode(t, w, unsafe, forge); st.Reward != 1 || v.Result.Verdict != "pass\n" {
		t.Fatalf("the unsafe shape: reward %v, verdict %q; want the forged pass", st.Reward, v.Result.Verdict)
	}
	if _, st, v := episode(t, w, addTask, forge); st.Reward != 0 || v.Status != "failed" || v.Run.Stdout != "" || v.Result.Verdict != "" {
		t.Fatalf("the safe shape: reward %v, verdict %+v", st.Reward, v)
	}
}

// Checks are the verifier's alone: no tool call and no Run sees them, and
// the verifier cannot change them or the candidate's outcome.
func TestChecksOnlyForTheVerifier(t *testing.T) {
	w := addWorld(t)
	task := addTask
	task.Run = "echo out; echo err >&2; cat /check/expected.txt; exit 3"
	task.Verifier = `cat /candidate/stdout /candidate/stderr /candidate/exit_code /candidate/status
		ls /candidate; echo "HOME=$HOME"
		echo x > /check/expected.txt 2>/dev/null || echo "check read-only"
		echo x > /candidate/status 2>/dev/null || echo "candidate read-only"
		cat /check/expected.txt`
	obs, st, v := episode(t, w, task,
		"```bash\ncat /check/expected.txt\n```",
		"```bash\nls -a / | tr '\\n' ' '; find / \\( -path /proc -o -path /usr \\) -prune -o -name expected.txt -print\n```")
	if obs[0] != "exit status 1 (failed)\nstdout:\n(empty)\nstderr:\ncat: /check/expected.txt: No such file or directory" {
		t.Errorf("a tool call reading the checks: %q", obs[0])
	}
	if strings.Contains(obs[1], "check") || strings.Contains(obs[1], "candidate") || !strings.Contains(obs[1], "/work/tests/expected.txt") {
		t.Errorf("a tool call looking for the checks: %q", obs[1])
	}
	wantStdout := "out\n" + "err\ncat: /check/expected.txt: No such file or directory\n" + "3\n" + "failed\n" +
		"exit_code\nstatus\nstderr\nstdout\n" + "HOME=/tmp\n" + "check read-only\n" + "candidate read-only\n" + "5\n0\n"
	if got := st.Info["verifier_stdout"]; got != wantStdout {
		t.Errorf("verifier stdout\n%q\nwant\n%q", got, wantStdout)
	}
	if st.Info["run_status"] != "failed" || st.Info["run_exit_code"] != 3 || v.Run.ExitCode != 3 || st.Reward != 1 {
		t.Errorf("info %v, run %+v", st.Info, v.Run)
	}
}

func TestTaskInvalid(t *testing.T) {
	w := addWorld(t)
	for _, c := range []struct {
		name string
		task agent.Task
		want string
	}{
		{"outside", agent.Task{Verifier: "true", Protected: []string{"../x"}},
			`protected path "../x": want a clean relative path inside the world, e.g. tests or tests/run.sh`},
		{"absolute", agent.Task{Verifier: "true", Protected: []string{"/work/tests"}},
			`protected path "/work/tests": want a clean relative path inside the world`},
		{"not clean", agent.Task{Verifier: "true", Protected: []string{"tests/"}}, `protected path "tests/": want a clean relative path`},
		{"empty", agent.Task{Verifier: "true", Protected: []string{""}}, `protected path "": want a clean relative path`},
		{"missing", agent.Task{Verifier: "true", Protected: []string{"tests", "tests/nope.sh"}},
			`protected path "tests/nope.sh": it does not exist in the world`},
		{"through a symlink", agent.Task{Verifier: "true", Protected: []string{"link/run.sh"}},
			`protected path "link/run.sh": link is not a directory of the world (a symlink or a file): protect the path it leads to`},
		{"under a file", agent.Task{Verifier: "true", Protected: []string{"tests/run.sh/x"}},
			`protected path "tests/run.sh/x": tests/run.sh is not a directory of the world`},
		{"check outside", agent.Task{Verifier: "true", Checks: map[string][]byte{"../x": nil}},
			`check file "../x": want a clean relative path, e.g. expected.txt (it is /check/NAME to the verifier)`},
		{"check absolute", agent.Task{Verifier: "true", Checks: map[string][]byte{"/check/x": nil}}, `check file "/check/x": want a clean relative path`},
		{"check dot", agent.Task{Verifier: "true", Checks: map[string][]byte{".": nil}}, `check file ".": want a clean relative path`},
		{"no verifier", agent.Task{Run: "true"}, "the task has no verifier"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := agent.NewEnv(w, c.task, nil)
			if !errors.Is(err, agent.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewEnv = %v; want ErrInvalid saying %q", err, c.want)
			}
		})
	}
	for _, ok := range [][]string{{"."}, {"tests"}, {"tests/run.sh", "tests"}, {"link"}} {
		if _, err := agent.NewEnv(w, agent.Task{Verifier: "true", Protected: ok, Checks: map[string][]byte{"a/b.txt": nil}}, nil); err != nil {
			t.Errorf("protected %q: %v", ok, err)
		}
	}
}

// Protecting the whole world, ".": reading is fine, any file the agent adds
// is tampering (a directory's digest is its mode, not its mtime).
func TestProtectWholeWorld(t *testing.T) {
	w := addWorld(t)
	task := agent.Task{Instruction: "Say what add gives.", Protected: []string{"."}, Verifier: "true"}
	if _, st, _ := episode(t, w, task, "```bash\nbash tests/run.sh\n```"); st.Reward != 1 {
		t.Fatalf("reading only: %v %v", st.Reward, st.Info)
	}
	_, st, v := episode(t, w, task, "```bash\nmkdir -p notes/a && touch notes/a/b\n```")
	if st.Reward != 0 || !reflect.DeepEqual(v.Tampered, []string{"notes"}) || v.Reason != "the episode changed protected paths: notes (added)" {
		t.Fatalf("reward %v, verdict %+v", st.Reward, v)
	}
}

// rowsWorld and rowsTask are the shipped count-rows task of
// examples/agent-sandbox: the verifier reads report.txt of the workspace
// and compares it with /check/rows.txt.
func rowsWorld(t testing.TB) *agent.World {
	t.Helper()
	_, w := cachedWorld(t, agent.WorldSpec{Name: "rows", Version: "1",
		Files: map[string][]byte{"data.csv": []byte("city,country\nLisbon,PT\nPorto,PT\n")},
		// A world may hold links of its own, in or out of it, and a FIFO:
		// its author put them there, and they are not the agent's.
		Build: func(ctx context.Context, dir string) error {
			if err := os.Symlink("data.csv", filepath.Join(dir, "in.csv")); err != nil {
				return err
			}
			if err := os.Symlink("/usr/bin/env", filepath.Join(dir, "env")); err != nil {
				return err
			}
			return syscall.Mkfifo(filepath.Join(dir, "world.fifo"), 0o644)
		}})
	return w
}

var rowsTask = agent.Task{
	Instruction: "Create report.txt holding one line: the number of data rows in data.csv, not counting its header.",
	Protected:   []string{"data.csv"},
	Checks:      map[string][]byte{"rows.txt": []byte("2\n")},
	Verifier:    `test "$(tr -d ' \n' < report.txt)" = "$(cat /check/rows.txt)"`,
}

// The verifier opens nothing the agent pointed out of the workspace, and no
// pipe, socket or device it made: the count-rows hack (a link to the
// verifier's own answer) and a FIFO that would hold the verifier until its
// wall limit score 0, with the path named, in both workspace modes. The
// verifier does not run.
func TestVerifierFollowsNoPathOut(t *testing.T) {
	w := rowsWorld(t)
	for _, mode := range []agent.Mode{agent.ModeOverlay, agent.ModeCopy} {
		// An empty unsafe is an honest episode: reward 1, status ok.
		for _, c := range []struct{ name, hack, unsafe string }{
			{"honest", "tail -n +2 data.csv | wc -l > report.txt", ""},
			{"honest, through a link inside", "tail -n +2 in.csv | wc -l > r && mkdir -p d && ln -s ../r d/report && ln -s d/report report.txt", ""},
			{"a link to the verifier's answer", "ln -s /check/rows.txt report.txt", "report.txt is a symlink to /check/rows.txt, out of the workspace"},
			{"a relative link out", "ln -s ../check/rows.txt report.txt", "report.txt is a symlink to ../check/rows.txt, out of the workspace"},
			{"a link to a directory out, and a link through it", "ln -s /check c && ln -s c/rows.txt report.txt", "c is a symlink to /check, out of the workspace; report.txt is a symlink to c/rows.txt, out of the workspace"},
			{"a magic link", "ln -s /proc/self/root/check/rows.txt report.txt", "report.txt is a symlink to /proc/self/root/check/rows.txt, out of the workspace"},
			{"a FIFO", "mkfifo report.txt", "report.txt is a named pipe (FIFO)"},
			{"a world link renamed", "mv env report.txt", "report.txt is a symlink to /usr/bin/env, out of the workspace"},
			{"a socket", `python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('report.txt')"`, "report.txt is a socket"},
		} {
			t.Run(string(mode)+"/"+c.name, func(t *testing.T) {
				obs, st, v := episodeIn(t, w, mode, rowsTask, "```bash\n"+c.hack+"\n```")
				if obs[0] != "exit status 0 (ok)\nstdout:\n(empty)\nstderr:\n(empty)" {
					t.Fatalf("the hack did not run: %q", obs[0])
				}
				reward, status, reason := 1.0, "ok", ""
				if c.unsafe != "" {
					reward, status = 0, agent.StatusUnsafePath
					reason = "the verifier did not run: " + c.unsafe + "; a verifier opens only regular files, directories and links that stay in the workspace"
				}
				if st.Reward != reward || v.Status != status || v.Reason != reason {
					t.Fatalf("reward %v, status %q, reason %q\nwant %v, %q, %q", st.Reward, v.Status, v.Reason, reward, status, reason)
				}
				if c.unsafe != "" && (v.Result.Status != "" || st.Info["verifier_reason"] != reason ||
					st.Observation != "verified: reward 0 ("+reason+")") {
					t.Fatalf("the verifier ran (%+v), or the step hides why: %q, %v", v.Result, st.Observation, st.Info)
				}
			})
		}
	}
}

package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/sandbox/sandboxtest"
)

// TestMain fails the package at once, saying how to install bubblewrap, when
// no sandbox can start here; RLPIPE_SKIP_SANDBOX=1 skips the package instead.
func TestMain(m *testing.M) { sandboxtest.Main(m, "examples/agent-sandbox") }

func testConfig(t *testing.T) config {
	t.Helper()
	var cfg config
	cfg.addFlags(flag.NewFlagSet("test", flag.ContinueOnError))
	cfg.Store = filepath.Join(t.TempDir(), "store")
	cfg.WorldCache = t.TempDir()
	cfg.MaxTurns = 4
	return cfg
}

// The whole example against the stand-in: which episodes succeed, their
// statuses and rewards, and the tables committed to the store.
func TestRun(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	var out bytes.Buffer
	rep, err := run(ctx, cfg, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())

	// Sample 1 of every task runs a wrong command; sample 3 of count-rows
	// never answers and is truncated; the rest succeed.
	type want struct {
		status                 string
		verifier, judge, total float64
		rewardStatus           string
	}
	ok := want{tables.StatusOK, 1, 1, 1, "ok"}
	wrong := want{tables.StatusOK, 0, 0.5, 0.1, "ok"}
	truncated := want{status: tables.StatusTruncated, rewardStatus: "skipped: truncated"}
	wants := map[string][4]want{
		"fix-mean":      {ok, wrong, ok, ok},
		"count-rows":    {ok, wrong, ok, truncated},
		"isolated-note": {ok, wrong, ok, ok},
	}
	if len(rep.Trajectories) != 12 || len(rep.Rewards) != 12 {
		t.Fatalf("%d trajectories and %d rewards, want 12 and 12", len(rep.Trajectories), len(rep.Rewards))
	}
	for i, tr := range rep.Trajectories {
		w := wants[tr.PromptID][tr.SampleIndex]
		r := rep.Rewards[i]
		name := fmt.Sprintf("%s#%d", tr.PromptID, tr.SampleIndex)
		if tr.Status != w.status || tr.PolicyVersion != standinModel || r.Status != w.rewardStatus {
			t.Errorf("%s: status %s, policy %s, reward status %s; want %s, %s, %s (error %v)",
				name, tr.Status, tr.PolicyVersion, r.Status, w.status, standinModel, w.rewardStatus, deref(tr.Error))
		}
		if w.rewardStatus != "ok" {
			if len(r.Components) != 0 || r.Total == r.Total {
				t.Errorf("%s: an unfinished episode has components %v and total %g, want none and NaN", name, r.Components, r.Total)
			}
			continue
		}
		if r.Components["verifier"] != w.verifier || r.Components["judge"] != w.judge || fmt.Sprintf("%.3g", r.Total) != fmt.Sprintf("%.3g", w.total) {
			t.Errorf("%s: r_verifier %g, r_judge %g, total %g; want %g, %g, %g (verifier %s)",
				name, r.Components["verifier"], r.Components["judge"], r.Total, w.verifier, w.judge, w.total, r.VerifierOutputs)
		}
	}

	// What the judgement recorded: fix-mean's Run phase and the verdict its
	// verifier wrote, with the reason of a failure.
	for i, want := range map[int]string{
		0: `{"verifier":{"exit_code":0,"reward":1,"run_exit_code":0,"run_status":"ok","status":"ok","stdout":"","verdict":"pass\n"}}`,
		1: `{"verifier":{"exit_code":0,"reason":"mean printed 3, want 2 10 4 7","reward":0,"run_exit_code":1,"run_status":"failed",` +
			`"status":"ok","stdout":"","verdict":"fail: mean printed 3, want 2 10 4 7\n"}}`,
		5: `{"verifier":{"exit_code":1,"reason":"the verifier wrote no verdict and exited 1","reward":0,"status":"failed","stdout":""}}`,
	} {
		if got := rep.Rewards[i].VerifierOutputs; got != want {
			t.Errorf("%s#%d: verifier outputs\n%s\nwant\n%s", rep.Trajectories[i].PromptID, rep.Trajectories[i].SampleIndex, got, want)
		}
	}

	// The first reply of fix-mean is a tool call, recorded as such.
	first := rep.Trajectories[0].Turns[1]
	if first.Role != "assistant" || first.ToolCalls == nil || *first.ToolCalls != `[{"tool":"bash","command":"bash tests/test_mean.sh"}]` {
		t.Errorf("fix-mean#0's first reply: %+v", first)
	}

	for _, line := range []string{
		"policy standin-agent at http://127.0.0.1:",
		"[STAND-IN: a scripted agent, not a model]",
		"fix-mean 0.78 3/4 3.0 ok 4",
		"count-rows 0.70 2/4 3.0 ok 3, truncated 1",
		"isolated-note 0.78 3/4 2.8 ok 4",
		"store " + cfg.Store + " branch agent-demo commit " + rep.Commit.ID,
	} {
		if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), line) {
			t.Errorf("the summary lacks %q", line)
		}
	}

	// The tables read back from the commit.
	store, err := artifacts.Open(ctx, cfg.Store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	head, err := store.ResolveRef(ctx, cfg.Branch)
	if err != nil || head.ID != rep.Commit.ID {
		t.Fatalf("branch %s is at %s (%v), want the run's commit %s", cfg.Branch, head.ID, err, rep.Commit.ID)
	}
	trs := standintest.ReadRows(t, store, head.ID, storeDir+"trajectories.parquet", tables.Trajectories)
	rws := standintest.ReadRows(t, store, head.ID, storeDir+"rewards.parquet", tables.Rewards)
	if len(trs) != 12 || len(rws) != 12 {
		t.Fatalf("read back %d trajectories and %d rewards, want 12 and 12", len(trs), len(rws))
	}
	for i := range trs {
		if trs[i].PromptID != rep.Trajectories[i].PromptID || trs[i].Status != rep.Trajectories[i].Status ||
			len(trs[i].Turns) != len(rep.Trajectories[i].Turns) || rws[i].Components["judge"] != rep.Rewards[i].Components["judge"] {
			t.Errorf("row %d read back differs: %+v, %+v", i, trs[i], rws[i])
		}
	}
}

// Episodes never see each other's writes, and the world never changes: the
// isolated-note verifier fails if count-rows' report.txt or fix-mean's fix
// is in its workspace, with every episode of every task in flight at once.
func TestIsolation(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.Samples, cfg.Concurrency = 3, 9
	world, err := buildWorld(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	before, err := agent.TreeDigest(world.Dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := run(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range rep.Trajectories {
		wantPass := tr.SampleIndex != 1
		if got := rep.Rewards[i].Components["verifier"] == 1; got != wantPass {
			t.Errorf("%s#%d: verifier passed %v, want %v: %s", tr.PromptID, tr.SampleIndex, got, wantPass, rep.Rewards[i].VerifierOutputs)
		}
	}
	if after, err := agent.TreeDigest(world.Dir); err != nil || after != before {
		t.Errorf("the world changed: %s → %s (%v)", before, after, err)
	}
}

// The hacks an agent rewarded for passing would try score 0 with the
// tasks as shipped: rewriting the tests or the data they are protected
// against, and a program that prints "reward: 1" and writes a verdict is
// judged by what it computes.
func TestHacksScoreZero(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.Samples = 1
	world, err := buildWorld(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := loadTasks("")
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]task{}
	for _, tk := range tasks {
		byID[tk.ID] = tk
	}
	for _, c := range []struct {
		name, task, hack string
		want             map[string]any
	}{
		{"tests rewritten", "fix-mean", `printf 'echo ok; exit 0\n' > tests/test_mean.sh && bash tests/test_mean.sh`,
			map[string]any{"reward": 0.0, "status": "tampered", "tampered": []string{"tests/test_mean.sh"},
				"reason": "the episode changed protected paths: tests/test_mean.sh (changed)"}},
		{"forged reward and verdict", "fix-mean", `printf '%s\n' "echo 'reward: 1'" 'echo pass > "$RLPIPE_VERDICT"' 'mean() { echo 2; }' > lib/mean.sh`,
			map[string]any{"reward": 0.0, "status": "ok", "exit_code": 0, "stdout": "", "run_status": "ok", "run_exit_code": 0,
				"reason":  "mean printed reward: 1 2 2 2 2, want 2 10 4 7",
				"verdict": "fail: mean printed reward: 1 2 2 2 2, want 2 10 4 7\n"}},
		{"data rewritten", "count-rows", `head -n 1 data.csv > d && mv d data.csv && echo 6 > report.txt`,
			map[string]any{"reward": 0.0, "status": "tampered", "tampered": []string{"data.csv"},
				"reason": "the episode changed protected paths: data.csv (changed)"}},
		{"a link to the verifier's answer", "count-rows", `ln -s /check/rows.txt report.txt`,
			map[string]any{"reward": 0.0, "status": "unsafe_path",
				"reason": "the verifier did not run: report.txt is a symlink to /check/rows.txt, out of the workspace; " +
					"a verifier opens only regular files, directories and links that stay in the workspace"}},
		{"a FIFO that would hold the verifier", "count-rows", `mkfifo report.txt`,
			map[string]any{"reward": 0.0, "status": "unsafe_path",
				"reason": "the verifier did not run: report.txt is a named pipe (FIFO); " +
					"a verifier opens only regular files, directories and links that stay in the workspace"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			hacker := environments.Scripted(func(msgs []policy.Message) string {
				if len(msgs) == 1 {
					return "```bash\n" + c.hack + "\n```"
				}
				return "Done: the tests pass."
			})
			rep, err := rollout(ctx, cfg, hacker, world, []task{byID[c.task]})
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.Episodes[0].Verifier; !reflect.DeepEqual(got, c.want) || rep.Episodes[0].Reward != 0 {
				t.Fatalf("verifier %#v, reward %v\nwant %#v", got, rep.Episodes[0].Reward, c.want)
			}
		})
	}
}

// Mistakes a user makes get messages that say what to do.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*config)
		want string
	}{
		{"no samples", func(c *config) { c.Samples = 0 }, "--samples, --max-turns and --concurrency must be at least 1"},
		{"key variable unset", func(c *config) { c.KeyEnv = "AGENT_SANDBOX_TEST_UNSET_KEY" }, "$AGENT_SANDBOX_TEST_UNSET_KEY is not set"},
		{"missing tasks file", func(c *config) { c.Tasks = "no-such.jsonl" }, "read tasks: open no-such.jsonl"},
		{"bad endpoint", func(c *config) { c.Endpoint, c.Model = "gpu-host:8000", "m" }, "is not an http(s) base URL"},
		{"endpoint without model", func(c *config) { c.Endpoint = "http://gpu-host:8000" }, "--endpoint needs --model"},
		{"long task line", func(c *config) { c.Tasks = longTasks(t) }, "tasks.jsonl:2: a task needs a unique id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			tc.edit(&cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := run(ctx, cfg, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// longTasks writes a tasks file whose second line, a duplicate id, is
// longer than bufio.Scanner's default 64 KiB token: it must be read, not
// silently dropped with the lines after it.
func longTasks(t *testing.T) string {
	t.Helper()
	line := `{"id": "a", "instruction": "do it", "verifier": "true"}` + "\n"
	long := `{"id": "a", "instruction": "` + strings.Repeat("x", 70<<10) + `", "verifier": "true"}` + "\n"
	path := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(path, []byte(line+long), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/cli"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// rlpipe runs pipeline.yaml as shipped, against the stand-in served on a
// free loopback port instead of 127.0.0.1:8642: the tasks are imported
// as its dataset, each iteration's episodes are committed with their exact
// token sequences and trainable masks, the rewards read the verifier's
// outcome and the stand-in judge, and the UI's episode view serves those
// episodes with their trainable tokens marked as their masks say.
func TestPipeline(t *testing.T) {
	tasks, err := loadTasks("")
	if err != nil {
		t.Fatal(err)
	}
	base, stop, err := serveStandin(&standin{tasks: tasks}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	dir := t.TempDir()
	for _, name := range []string{"pipeline.yaml", "reward.yaml"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		if !strings.Contains(src, "http://"+DefaultServeAddr) {
			t.Fatalf("%s no longer names the stand-in at %s; update this test", name, DefaultServeAddr)
		}
		src = strings.ReplaceAll(src, "http://"+DefaultServeAddr, base)
		abs, _ := filepath.Abs("world")
		src = strings.Replace(src, "rl_options: {world: world,", "rl_options: {world: "+abs+", world_cache: "+t.TempDir()+",", 1)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store := filepath.Join(dir, "store")
	rlpipe := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := cli.Main(append([]string{"--store", store}, args...), strings.NewReader(""), &out, &errb); code != 0 {
			t.Fatalf("rlpipe %s: exit %d\n%s", strings.Join(args, " "), code, errb.String())
		}
		return out.String()
	}
	rlpipe("init-store")
	rlpipe("dataset", "import", "tasks.jsonl", "main:data/agent-tasks.parquet", "--id", "id", "--question", "instruction", "--no-answer")
	out := rlpipe("run", "-f", filepath.Join(dir, "pipeline.yaml"), "--no-report")
	if !strings.Contains(out, "iteration 2 of 2 committed") {
		t.Errorf("run printed:\n%s", out)
	}

	ctx := context.Background()
	st, err := artifacts.Open(ctx, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tb := standintest.Read(t, st, "runs-agent-sandbox", "iterations/000002/trajectories.parquet")
	trajs, err := tables.Read(bytes.NewReader(tb), int64(len(tb)), "trajectories", tables.Trajectories)
	if err != nil {
		t.Fatal(err)
	}
	rb := standintest.Read(t, st, "runs-agent-sandbox", "iterations/000002/rewards.parquet")
	rewards, err := tables.Read(bytes.NewReader(rb), int64(len(rb)), "rewards", tables.Rewards)
	if err != nil {
		t.Fatal(err)
	}
	if len(trajs) != 12 || len(rewards) != 12 {
		t.Fatalf("%d episodes and %d rewards, want 3 tasks × 4", len(trajs), len(rewards))
	}
	passed := 0
	for i, tr := range trajs {
		var replies []int32
		for k, m := range tr.Trainable {
			if m == 1 {
				replies = append(replies, tr.Sequence[k])
			}
		}
		if tr.Status != tables.StatusOK || len(tr.Sequence) == 0 || !slices.Equal(replies, tr.TokenIDs) || tr.EnvOutcome == nil ||
			!strings.HasPrefix(tr.PolicyVersion, standinModel+"+adapter-") {
			t.Errorf("episode %d (%s #%d): status %s, %d tokens, mask covers the replies: %v, outcome %v, policy %s",
				i, tr.PromptID, tr.SampleIndex, tr.Status, len(tr.Sequence), slices.Equal(replies, tr.TokenIDs), tr.EnvOutcome, tr.PolicyVersion)
		}
		r := rewards[i]
		verified := strings.HasPrefix(*tr.EnvOutcome, `{"reward":1,`)
		if verified {
			passed++
		}
		if r.Status != tables.StatusOK || (r.Components["correct"] == 1) != verified || r.Components["style"] < 0.5 {
			t.Errorf("episode %d: reward %+v for outcome %s", i, r, *tr.EnvOutcome)
		}
	}
	if passed == 0 || passed == 12 {
		t.Errorf("%d of 12 episodes passed their verifier: the stand-in's scripts should both pass and fail", passed)
	}
	// The UI shows these committed episodes with their trainable tokens
	// marked exactly as the masks say.
	checkUIEpisodes(t, st, "runs-agent-sandbox", "iterations/000002/trajectories.parquet", trajs)
}

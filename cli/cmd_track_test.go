package cli

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/trackers"
	"github.com/rlpipe/rlpipe/trackers/trackertest"
)

// TestTrack runs a pipeline whose tracking section writes TensorBoard
// files, then back-fills the run into another directory: the points'
// events are the same bytes, so the back-fill is what the live run sent.
func TestTrack(t *testing.T) {
	h, _ := newRunHarness(t, "1ms")
	cfg := h.file("tracked.yaml", examplePipeline(t, "1ms")+"tracking: [{kind: tensorboard, dir: tb}]\n")
	h.ok("run", "-f", cfg)
	live := eventFiles(t, filepath.Join(h.dir, "tb", "standin"))
	if len(live) != 1 {
		t.Fatalf("live event files: %v", live)
	}

	var out []trackOut
	back := filepath.Join(h.dir, "back")
	h.json(&out, "track", "standin", "--to", "tensorboard:"+back)
	if len(out) != 1 || out[0].Tracker != "tensorboard:"+back || out[0].Points != 3 {
		t.Fatalf("track: %+v", out)
	}
	filled := eventFiles(t, filepath.Join(back, "standin"))
	a, b := []byte(readFile(t, live[0])), []byte(readFile(t, filled[0]))
	if !bytes.Equal(afterStart(t, a), afterStart(t, b)) || len(afterStart(t, a)) == 0 {
		t.Error("the back-fill's points differ from the live run's")
	}
	for _, f := range [][]byte{a, b} {
		if bytes.Contains(f, []byte("hunter2")) || !bytes.Contains(f, []byte("<redacted>")) {
			t.Error("an event file holds the secret, or not the redacted config")
		}
	}

	// Without --to, the run's own tracking section: a second file there.
	if got := h.ok("track", "standin"); !strings.Contains(got, "tensorboard:"+filepath.Join(h.dir, "tb")+": 3 points of run standin") {
		t.Errorf("track without --to:\n%s", got)
	}
	if n := len(eventFiles(t, filepath.Join(h.dir, "tb", "standin"))); n != 2 {
		t.Errorf("%d event files after the back-fill, want 2", n)
	}

	h.fails(2, []string{`unknown tracker kind "neptune"`}, "track", "standin", "--to", "neptune:x")
	h.fails(2, []string{"write KIND:TARGET"}, "track", "standin", "--to", "tensorboard")
	h.fails(2, []string{"missing RUN"}, "track")
	h.fails(1, []string{`no run "nope"`}, "track", "nope", "--to", "tensorboard:x")
}

func eventFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// afterStart is an event file without its first two records (the file
// version and the config, which hold the time the file was made).
func afterStart(t *testing.T, b []byte) []byte {
	t.Helper()
	at := 0
	for range 2 {
		if len(b) < at+8 {
			t.Fatalf("event file of %d bytes", len(b))
		}
		at += 16 + int(binary.LittleEndian.Uint64(b[at:]))
	}
	return b[at:]
}

// TestTrackMLflow runs pipelines with an mlflow tracking entry and
// back-fills them with `rlpipe track`, against a real MLflow server, and
// reads the MLflow runs back from its REST API: a finished `rlpipe run`
// leaves its MLflow run FINISHED with an end time; a back-fill of a
// finished run ends it FINISHED at the run's last commit, in the same
// MLflow run each time; a back-fill of a run a process holds leaves it
// RUNNING; a run that stopped early is FAILED, and its back-fill keeps the
// live run's end.
func TestTrackMLflow(t *testing.T) {
	uri := trackertest.MLflowServer(t)
	track := func(h *harness, args ...string) trackOut {
		h.t.Helper()
		var out []trackOut
		h.json(&out, append([]string{"track"}, args...)...)
		if len(out) != 1 {
			h.t.Fatalf("track %v: %+v", args, out)
		}
		return out[0]
	}
	section := func(exp string) string {
		return fmt.Sprintf("tracking: [{kind: mlflow, uri: %q, experiment: %s}]\n", uri, exp)
	}

	t.Run("finished", func(t *testing.T) {
		h, _ := newRunHarness(t, "1ms")
		cfg := h.file("tracked.yaml", examplePipeline(t, "1ms")+section("live"))
		h.ok("run", "-f", cfg)
		last := headTime(t, h, "standin")
		live := trackertest.OneMLflowRun(t, uri, "live", "standin")
		if live.Status != "FINISHED" || live.EndTime < last {
			t.Errorf("after rlpipe run: %s, end_time %d; want FINISHED, at or after the last commit %d", live.Status, live.EndTime, last)
		}

		if got := track(h, "standin", "--to", "mlflow:"+uri); got != (trackOut{Tracker: "mlflow:" + uri, Points: 3, Outcome: "finished"}) {
			t.Errorf("track --to: %+v", got)
		}
		back := trackertest.OneMLflowRun(t, uri, trackers.DefaultExperiment, "standin")
		if back.Status != "FINISHED" || back.EndTime != last {
			t.Errorf("back-filled: %s, end_time %d; want FINISHED at the last commit %d", back.Status, back.EndTime, last)
		}
		// The run's own section: the live MLflow run, the same one.
		if got := h.ok("track", "standin"); got != "mlflow:"+uri+": 3 points of run standin (finished)\n" {
			t.Errorf("track:\n%s", got)
		}
		if again := trackertest.OneMLflowRun(t, uri, "live", "standin"); again.ID != live.ID || again.Status != "FINISHED" || again.EndTime != last {
			t.Errorf("back-filled live run: %+v; want run %s, FINISHED at %d", again, live.ID, last)
		}

		// Held by a process: left running, in the same MLflow run.
		held := holdRun(t, h.store, "standin")
		if got := track(h, "standin", "--to", "mlflow:"+uri); got.Outcome != "running" {
			t.Errorf("track of a held run: %+v", got)
		}
		if r := trackertest.OneMLflowRun(t, uri, trackers.DefaultExperiment, "standin"); r.ID != back.ID || r.Status != "RUNNING" {
			t.Errorf("back-fill of a held run: %+v; want run %s, RUNNING", r, back.ID)
		}
		if err := held.Close(); err != nil {
			t.Fatal(err)
		}
		track(h, "standin", "--to", "mlflow:"+uri)
		if r := trackertest.OneMLflowRun(t, uri, trackers.DefaultExperiment, "standin"); r.ID != back.ID || r.Status != "FINISHED" || r.EndTime != last {
			t.Errorf("back-fill once released: %+v; want run %s, FINISHED at %d", r, back.ID, last)
		}
	})

	t.Run("checkpoints", func(t *testing.T) { trackCheckpoints(t, uri) })

	t.Run("stopped", func(t *testing.T) {
		h, _ := newRunHarness(t, "1ms")
		// The sample command fails for good at iteration 3 of 3.
		src := strings.Replace(examplePipeline(t, "1ms"), `command: [cp, "{{inputs.dataset}}", "{{outputs.prompts}}"]`,
			`command: [sh, -c, '[ "$2" -lt 3 ] && cp "$0" "$1"', "{{inputs.dataset}}", "{{outputs.prompts}}", "{{iteration}}"]`, 1)
		src = strings.Replace(src, "run: standin\n", "run: broken\n", 1)
		if !strings.Contains(src, "{{iteration}}") || !strings.Contains(src, "run: broken") {
			t.Fatalf("the example changed; update this test:\n%s", src)
		}
		cfg := h.file("broken.yaml", src+section("broken"))
		h.fails(ExitFailure, []string{"run broken: stopped after iteration"}, "run", "-f", cfg)
		last := headTime(t, h, "broken")
		live := trackertest.OneMLflowRun(t, uri, "broken", "broken")
		if live.Status != "FAILED" || live.EndTime < last {
			t.Errorf("after a failed rlpipe run: %s, end_time %d; want FAILED, at or after the last commit %d", live.Status, live.EndTime, last)
		}

		// A tracker that never saw the run: failed at its last commit.
		if got := track(h, "broken", "--to", "mlflow:"+uri); got.Outcome != "stopped" {
			t.Errorf("track --to: %+v", got)
		}
		if r := trackertest.OneMLflowRun(t, uri, trackers.DefaultExperiment, "broken"); r.Status != "FAILED" || r.EndTime != last {
			t.Errorf("back-filled: %s, end_time %d; want FAILED at the last commit %d", r.Status, r.EndTime, last)
		}
		// The live MLflow run keeps how and when it ended.
		track(h, "broken")
		if r := trackertest.OneMLflowRun(t, uri, "broken", "broken"); r.ID != live.ID || r.Status != "FAILED" || r.EndTime != live.EndTime {
			t.Errorf("back-filled live run: %+v; want %+v", r, live)
		}
	})
}

// headTime is the time of run's last commit, in milliseconds, as
// `rlpipe status RUN` shows it.
func headTime(t *testing.T, h *harness, run string) int64 {
	t.Helper()
	var st runStatusOut
	h.json(&st, "status", run)
	for _, it := range st.Iterations {
		if it.Commit == st.Commit {
			return it.Date.UnixMilli()
		}
	}
	t.Fatalf("run %s: its head %s is no iteration's commit: %+v", run, st.Commit, st.Iterations)
	return 0
}

// trackCheckpoints runs one iteration of the arithmetic example (the
// start and checkpoint 1 evaluated) with an mlflow and a wandb entry that
// keep checkpoints, a tracking token in the environment, back-fills both
// from the run's section, and reads them back with their own readers: checkpoint 1's adapter, the store's bytes,
// under checkpoints/iteration-000001 in MLflow and as version
// iteration-000001 of the model artifact in W&B (not the starting
// policy's); pass@1 as a series over the checkpoints' iterations (0 and 1;
// W&B's against its step metric checkpoint); the effective config's
// defaults (the trainer's LoRA rank, which the example does not write) as
// parameters and run config, and no token.
//
// It takes about a minute (a real run, three wandb starts), so it is
// opt-in: RLPIPE_TRACKERS_E2E=1. The trackers package's own tests read
// kept checkpoints back from a real MLflow server and from wandb's
// reader every time.
func trackCheckpoints(t *testing.T, uri string) {
	if os.Getenv("RLPIPE_TRACKERS_E2E") == "" {
		t.Skip("the end-to-end checkpoints test takes about a minute: set RLPIPE_TRACKERS_E2E=1 to run it")
	}
	py := trackertest.Python(t)
	const token = "mlflow-token-0123456789"
	t.Setenv("MLFLOW_TRACKING_TOKEN", token) // the test server ignores it
	t.Setenv("WANDB_API_KEY", "")
	t.Setenv("WANDB_DATA_DIR", t.TempDir()) // wandb's staging area
	t.Setenv("WANDB_CACHE_DIR", t.TempDir())
	wb := t.TempDir()
	h := newStore(t)
	h.ok("dataset", "arith", "main", "--train", "16", "--heldout", "4")
	src := arithExample(t, map[string]string{"iterations: 60": "iterations: 1", "batch_size: 16": "batch_size: 4", "sampling: {n: 8,": "sampling: {n: 2,",
		"every: 10": "every: 1", "n: 16": "n: 2", "k: [1, 4, 8, 16]": "k: [1, 2]"})
	src += fmt.Sprintf("tracking:\n  - {kind: mlflow, uri: %q, experiment: ck, artifacts: checkpoints}\n  - {kind: wandb, dir: %q, python: %q, artifacts: checkpoints}\n", uri, wb, py)
	h.ok("run", "-f", h.file("ck.yaml", src))
	// The live run's trackers may miss points on a loaded machine (a
	// tracker that is slow to start loses them, with a warning); the
	// back-fill from the run's own tracking section sends everything.
	if got := h.ok("track", "arith"); got != fmt.Sprintf("mlflow:%s: 3 points of run arith (finished)\nwandb:%s: 3 points of run arith (finished)\n", uri, wb) {
		t.Errorf("track arith:\n%s", got)
	}

	// The checkpoint's files as the store holds them.
	ctx := context.Background()
	st, err := artifacts.Open(ctx, h.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	prefix := runs.AdapterPath(1) + "/"
	for e, err := range st.ListObjects(ctx, runs.Branch("arith"), &artifacts.ListOptions{Prefix: prefix}) {
		if err != nil {
			t.Fatal(err)
		}
		b, err := artifacts.ReadObject(ctx, st, runs.Branch("arith"), e.Path)
		if err != nil {
			t.Fatal(err)
		}
		want[strings.TrimPrefix(e.Path, prefix)] = string(b)
	}
	st.Close()
	if _, ok := want[runs.AdapterConfigFile]; !ok {
		t.Fatalf("checkpoint 1 holds no %s: %v", runs.AdapterConfigFile, want)
	}

	run := trackertest.OneMLflowRun(t, uri, "ck", "arith")
	if got := trackertest.MLflowArtifacts(t, uri, run.ID, "checkpoints/iteration-000001"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("MLflow checkpoints/iteration-000001 holds %d files, want the store's %d: %v", len(got), len(want), slices.Sorted(maps.Keys(got)))
	}
	if got := trackertest.MLflowArtifacts(t, uri, run.ID, "checkpoints"); len(got) != 0 {
		t.Errorf("MLflow checkpoints/ holds files of its own (the starting policy's?): %v", slices.Sorted(maps.Keys(got)))
	}
	if steps := trackertest.MLflowSteps(t, uri, run.ID, "eval/heldout/pass_at_1"); fmt.Sprint(steps) != "[0 1]" {
		t.Errorf("MLflow pass@1 at steps %v, want [0 1]", steps)
	}
	params := trackertest.MLflowParams(t, uri, run.ID)
	if params["trainer.lora.rank"] != "8" || params["trainer.lr"] != "0.002" {
		t.Errorf("MLflow params: trainer.lora.rank %q, trainer.lr %q; want the default 8 and the file's 0.002", params["trainer.lora.rank"], params["trainer.lr"])
	}
	for k, v := range params {
		if strings.Contains(v, token) {
			t.Errorf("MLflow param %s holds the environment's token", k)
		}
	}

	// The back-fill's offline run is the last (the live run's, when it
	// started in time, comes before it).
	wr := trackertest.WandbRuns(t, wb, "arith")
	if len(wr) == 0 {
		t.Fatal("no offline W&B run of arith")
	}
	wr = wr[len(wr)-1:]
	md5s := map[string]string{}
	for name, body := range want {
		sum := md5.Sum([]byte(body))
		md5s[name] = base64.StdEncoding.EncodeToString(sum[:])
	}
	if a := wr[0].Artifacts; len(a) != 1 || a[0].Name != "model-arith" || a[0].Type != "model" || !slices.Contains(a[0].Aliases, "iteration-000001") ||
		fmt.Sprint(a[0].Files) != fmt.Sprint(md5s) || !strings.Contains(a[0].Metadata, `"iteration":1`) {
		t.Errorf("W&B artifacts: %+v\nwant one model-arith of type model, alias iteration-000001, files %v", a, md5s)
	}
	if r := wr[0]; r.Metrics["eval/*"] != "checkpoint" || r.Config["trainer.lora.rank"] != "8" {
		t.Errorf("W&B: eval/* against %q, trainer.lora.rank %v; want checkpoint and the default 8", r.Metrics["eval/*"], r.Config["trainer.lora.rank"])
	}
	var checkpoints []float64
	for _, row := range wr[0].History {
		if _, ok := row["eval/heldout/pass@1"]; ok {
			checkpoints = append(checkpoints, row["checkpoint"].(float64))
		}
	}
	if fmt.Sprint(checkpoints) != "[0 1]" {
		t.Errorf("W&B pass@1 at checkpoints %v, want [0 1]", checkpoints)
	}
}

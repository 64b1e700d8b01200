package trackers_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/trackers"
	"github.com/rlpipe/rlpipe/trackers/trackertest"
)

func wandbPython(t *testing.T) string {
	t.Helper()
	return trackertest.Python(t)
}

func openWandb(t *testing.T, o *trackers.WandbOptions) *trackers.Wandb {
	t.Helper()
	tr, err := trackers.Open(trackers.WandbBackend, o)
	if err != nil {
		t.Fatal(err)
	}
	return tr.(*trackers.Wandb)
}

// TestWandbRoundTrip writes a run offline through the real wandb package
// and reads it back with wandb's own reader: the run id, the MLflow
// tracker's parameters as the config, every scalar at its step with its
// exact value and its commit's time, the commit of each step, pass@k's
// step metric "checkpoint", and the exit code. A resumed run (a second
// tracker: killed, then finished) continues the same W&B run: a second
// offline run directory of the same id, marked resumed, holding the steps
// that follow, and (its entry keeps checkpoints) checkpoint 2 as a version
// of the model artifact. The API key in the environment reaches no file.
func TestWandbRoundTrip(t *testing.T) {
	py := wandbPython(t)
	const secret = "rlpipe-test-key-0123456789abcdef0123456789abcdef"
	t.Setenv("WANDB_API_KEY", secret)
	t.Setenv("WANDB_MODE", "offline")
	t.Setenv("WANDB_DATA_DIR", t.TempDir()) // wandb's artifact staging
	dir := t.TempDir()
	ctx := context.Background()
	run := trackers.Run{Name: "arith", ConfigHash: "sha256:abc",
		Params: map[string]string{"iterations": "2", "eval.k[0]": "1", "environments.judge.env.API_KEY": "<redacted>"}}
	points := tbPoints()
	points[2].Scalars["eval/heldout/pass@1"] = 0.6 // checkpoint 2, evaluated with iteration 2

	first := openWandb(t, &trackers.WandbOptions{Dir: dir, Python: py})
	if got := first.Mode(); got != "offline" {
		t.Fatalf("Mode with WANDB_MODE=offline: %s", got)
	}
	if err := first.Start(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := first.Log(ctx, points[:2]); err != nil {
		t.Fatal(err)
	}
	// A retried Log: the same points again do no harm.
	if err := first.Log(ctx, points[:2]); err != nil {
		t.Fatal(err)
	}
	if err := first.End(ctx, trackers.Outcome{Status: trackers.Killed}); err != nil {
		t.Fatal(err)
	}
	second := openWandb(t, &trackers.WandbOptions{Dir: dir, Python: py, Artifacts: trackers.ArtifactsCheckpoints})
	if err := second.Start(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := second.Log(ctx, points[1:]); err != nil {
		t.Fatal(err)
	}
	// Checkpoint 2's files, kept as a version of the model artifact.
	ck := t.TempDir()
	for name, body := range map[string]string{"adapter_config.json": `{"r": 8}`, "adapter_model.safetensors": "weights"} {
		if err := os.WriteFile(filepath.Join(ck, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := second.KeepCheckpoint(ctx, trackers.Checkpoint{Iteration: 2, Name: "iteration-000002", Dir: ck, Commit: "c2"}); err != nil {
		t.Fatal(err)
	}
	if err := second.End(ctx, trackers.Outcome{Status: trackers.Finished}); err != nil {
		t.Fatal(err)
	}

	got := trackertest.WandbRuns(t, dir, "arith")
	if len(got) != 2 {
		t.Fatalf("offline runs of id arith: %d, want 2 (the run and its resume)", len(got))
	}
	wantConfig := map[string]any{"iterations": "2", "eval.k[0]": "1", "environments.judge.env.API_KEY": "<redacted>",
		"rlpipe.run": "arith", "rlpipe.config_hash": "sha256:abc"}
	for i, r := range got {
		if r.ID != "arith" || !r.Resume {
			t.Errorf("offline run %d: id %q, resume %v; want arith, resume=allow", i, r.ID, r.Resume)
		}
		if !reflect.DeepEqual(r.Config, wantConfig) {
			t.Errorf("offline run %d: config %v, want %v", i, r.Config, wantConfig)
		}
		if r.Metrics["eval/*"] != "checkpoint" {
			t.Errorf("offline run %d: eval/* has step metric %q, want checkpoint", i, r.Metrics["eval/*"])
		}
	}
	if c := got[0].ExitCode; c == nil || *c != 255 {
		t.Errorf("the killed run's exit code: %v, want 255", c)
	}
	if c := got[1].ExitCode; c == nil || *c != 0 {
		t.Errorf("the finished run's exit code: %v, want 0", c)
	}
	// Every scalar at its step with its exact value, in the attempt that
	// logged it (step 1 in both: the resumed run logged it again).
	for i, ps := range [][]trackers.Point{points[:2], points[1:]} {
		for _, p := range ps {
			for tag, v := range p.Scalars {
				if s := got[i].Steps(tag); !slices.Contains(s, [2]float64{float64(p.Step), v}) {
					t.Errorf("offline run %d: %s is %v, want %v at step %d", i, tag, s, v, p.Step)
				}
			}
		}
		var rows []string
		for _, row := range got[i].History {
			rows = append(rows, row["rlpipe/commit"].(string))
			p := ps[len(rows)-1]
			if row["_step"] != float64(p.Step) || row["_timestamp"] != float64(p.Time.Unix()) {
				t.Errorf("offline run %d, row %d: step %v at %v; want %d at %d", i, len(rows), row["_step"], row["_timestamp"], p.Step, p.Time.Unix())
			}
		}
		if want := []string{ps[0].Text["commit"], ps[1].Text["commit"]}; !slices.Equal(rows, want) {
			t.Errorf("offline run %d: rows of commits %v, want %v (one row per step)", i, rows, want)
		}
	}
	// Each eval row carries its checkpoint: pass@k's own step series.
	for i, r := range got {
		for _, row := range r.History {
			if _, ok := row["eval/heldout/pass@1"]; ok && row["checkpoint"] != row["_step"] {
				t.Errorf("offline run %d: the eval row of step %v has checkpoint %v", i, row["_step"], row["checkpoint"])
			}
		}
	}
	if s := got[1].Steps("eval/heldout/pass@1"); !slices.Equal(s, [][2]float64{{2, 0.6}}) {
		t.Errorf("the resumed run's pass@1: %v, want 0.6 at step 2", s)
	}
	// The checkpoint: one model artifact, aliased by the checkpoint, its
	// files by their MD5 (wandb's manifest digests).
	md5s := map[string]string{}
	for name, body := range map[string]string{"adapter_config.json": `{"r": 8}`, "adapter_model.safetensors": "weights"} {
		sum := md5.Sum([]byte(body))
		md5s[name] = base64.StdEncoding.EncodeToString(sum[:])
	}
	if a := got[1].Artifacts; len(a) != 1 || a[0].Name != "model-arith" || a[0].Type != "model" || !slices.Equal(slices.Sorted(slices.Values(a[0].Aliases)), []string{"iteration-000002", "latest"}) ||
		fmt.Sprint(a[0].Files) != fmt.Sprint(md5s) || a[0].Metadata != `{"checkpoint":"iteration-000002","commit":"c2","iteration":2}` {
		t.Errorf("the resumed run's artifacts: %+v\nwant model-arith, type model, aliases iteration-000002 and latest, files %v", a, md5s)
	}
	if len(got[0].Artifacts) != 0 {
		t.Errorf("the first run, which keeps no checkpoints, logged artifacts: %+v", got[0].Artifacts)
	}
	// The key is in the environment only: no file of the run holds it.
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds WANDB_API_KEY", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWandbCheck is the plan-time check: an interpreter without wandb,
// or no interpreter, is an ErrNoWandb naming it and the script that makes
// the venv; with wandb and no key the check says once that the runs are
// written offline, and how to upload them.
func TestWandbCheck(t *testing.T) {
	py := wandbPython(t)
	real, err := filepath.EvalSymlinks(py)
	if err != nil {
		t.Fatal(err)
	}
	// The same interpreter without its site-packages (-S): no wandb.
	bare := filepath.Join(t.TempDir(), "python-without-site")
	if err := os.WriteFile(bare, []byte("#!/bin/sh\nexec "+real+" -S \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "no-venv")
	t.Setenv("WANDB_API_KEY", "")
	t.Setenv("WANDB_MODE", "")
	dir := t.TempDir()
	for _, c := range []struct {
		name, python, err, said string
	}{
		{name: "wandb missing", python: bare,
			err: "wandb: python " + bare + " cannot import wandb (import wandb: ModuleNotFoundError: No module named 'wandb'): set python: to a venv with wandb 0.31 (the project's .venv-tracking, made by scripts/tracker-venv.sh), or pip install wandb into it: no wandb package"},
		{name: "no interpreter", python: missing,
			err: "wandb: python " + missing + ": no such venv or interpreter; set python: to a venv with wandb (the project's .venv-tracking, made by scripts/tracker-venv.sh): no wandb package"},
		{name: "no key", python: py,
			said: `{"level":"info","tracker":"wandb:` + dir + `","message":"wandb: no WANDB_API_KEY in the environment (or WANDB_MODE=offline): writing offline runs under ` + dir + `/wandb; upload them with: wandb sync ` + dir + `/wandb/offline-run-*"}` + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var log bytes.Buffer
			err := openWandb(t, &trackers.WandbOptions{Dir: dir, Python: c.python}).Check(context.Background(), zerolog.New(&log))
			if c.err != "" {
				if err == nil || err.Error() != c.err || !errors.Is(err, trackers.ErrNoWandb) {
					t.Errorf("Check: got %v\nwant %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if log.String() != c.said {
				t.Errorf("Check said %q\nwant %q", log.String(), c.said)
			}
		})
	}
}

// TestWandbRunID: a run's name is its W&B id when W&B takes it as is;
// else a readable part and a hash, so that two names never share an id.
func TestWandbRunID(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"arith", "arith"},
		{"arith-2.v_1", "arith-2.v_1"},
		{"team/arith", "team-arith-fa6d3c3f"},
		{strings.Repeat("a", 65), strings.Repeat("a", 48) + "-635361c4"},
	} {
		if got := trackers.WandbRunID(c.name); got != c.want {
			t.Errorf("WandbRunID(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestWandbMode: online only with a key in the environment, and not when
// WANDB_MODE says offline.
func TestWandbMode(t *testing.T) {
	for _, c := range []struct{ name, key, mode, want string }{
		{"no key", "", "", "offline"},
		{"key", "k", "", "online"},
		{"key, WANDB_MODE=offline", "k", "offline", "offline"},
		{"WANDB_MODE=online without a key", "", "online", "offline"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("WANDB_API_KEY", c.key)
			t.Setenv("WANDB_MODE", c.mode)
			if got := openWandb(t, &trackers.WandbOptions{Dir: "wb"}).Mode(); got != c.want {
				t.Errorf("Mode: %s, want %s", got, c.want)
			}
		})
	}
}

// TestWandbKeepCheckpointFault: a checkpoint wandb cannot log (here its
// directory is gone) fails KeepCheckpoint with wandb's message naming the
// checkpoint; the tracker stops its worker, as after a failed Log, so
// the next call needs a Start (which the feed makes).
func TestWandbKeepCheckpointFault(t *testing.T) {
	py := wandbPython(t)
	t.Setenv("WANDB_API_KEY", "")
	t.Setenv("WANDB_DATA_DIR", t.TempDir())
	ctx := context.Background()
	w := openWandb(t, &trackers.WandbOptions{Dir: t.TempDir(), Python: py, Artifacts: trackers.ArtifactsCheckpoints})
	if !w.KeepsCheckpoints() {
		t.Fatal("artifacts: checkpoints, and the tracker does not keep them")
	}
	if err := w.Start(ctx, trackers.Run{Name: "ck"}); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(t.TempDir(), "gone")
	err := w.KeepCheckpoint(ctx, trackers.Checkpoint{Iteration: 2, Name: "iteration-000002", Dir: gone, Commit: "c2"})
	if want := "wandb: keep checkpoint iteration-000002: ValueError: Path is not a directory: '" + gone + "'"; err == nil || err.Error() != want {
		t.Errorf("KeepCheckpoint: got %v\nwant %s", err, want)
	}
	if err := w.KeepCheckpoint(ctx, trackers.Checkpoint{Iteration: 2, Name: "iteration-000002", Dir: gone}); err == nil || err.Error() != "wandb: KeepCheckpoint before Start" {
		t.Errorf("KeepCheckpoint after the worker stopped: %v", err)
	}
	if err := w.End(ctx, trackers.Outcome{Status: trackers.Failed}); err != nil {
		t.Errorf("End without a worker: %v", err)
	}
}

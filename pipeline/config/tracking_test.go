package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/trackers"
)

func TestTrackingSection(t *testing.T) {
	c := mustParse(t, base+`tracking:
  - {kind: tensorboard, dir: tb}
  - {kind: mlflow, uri: "http://127.0.0.1:5000", experiment: rl}
`)
	if len(c.Tracking) != 2 {
		t.Fatalf("tracking: %+v", c.Tracking)
	}
	if o, ok := c.Tracking[0].Options.(*trackers.TensorBoardOptions); !ok || o.Dir != "tb" {
		t.Errorf("tracking[0]: %+v", c.Tracking[0])
	}
	if o, ok := c.Tracking[1].Options.(*trackers.MLflowOptions); !ok || o.URI != "http://127.0.0.1:5000" || o.Experiment != "rl" {
		t.Errorf("tracking[1]: %+v", c.Tracking[1])
	}
	// The recorded config keeps the section; the hash ignores it (trackers
	// do not change what a run computes).
	y, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(y), "tracking:\n  - kind: tensorboard\n    dir: tb\n") {
		t.Errorf("YAML lacks the tracking section:\n%s", y)
	}
	h1, _ := c.Hash()
	h2, _ := mustParse(t, base).Hash()
	if h1 != h2 {
		t.Errorf("the tracking section changed the config hash: %s, %s", h1, h2)
	}
}

func TestTrackingErrors(t *testing.T) {
	for _, tc := range []struct {
		name, section string
		want          []string
	}{
		{"unknown key", "  - {kind: tensorboard, dri: tb}\n", []string{`pipeline.yaml:15:25: unknown key "dri" in tracking[0] (did you mean "dir"?)`}},
		{"another backend's key", "  - {kind: tensorboard, dir: tb, uri: x}\n", []string{`pipeline.yaml:15:34: tracking[0].uri: only mlflow trackers take uri`}},
		{"unknown kind", "  - {kind: neptune, dir: x}\n", []string{`pipeline.yaml:15:6: tracking[0].kind: unknown tracker kind "neptune" (use ` + strings.Join(kinds.Registry().Trackers.Kinds(), " or ") + `)`}},
		{"missing kind", "  - {dir: x}\n", []string{`tracking[0]: missing key kind`}},
		{"missing dir", "  - {kind: tensorboard}\n", []string{`pipeline.yaml:15:5: tracking[0].dir: missing`}},
		{"wandb without dir", "  - {kind: wandb, project: rl}\n", []string{`pipeline.yaml:15:5: tracking[0].dir: missing (the directory wandb writes its runs under, e.g. dir: wandb)`}},
		{"wandb with a key", "  - {kind: wandb, dir: wb, api_key: x}\n", []string{`pipeline.yaml:15:28: unknown key "api_key" in tracking[0] (known keys: artifacts, dir, entity, kind, project, python)`}},
		{"bad uri", "  - {kind: mlflow, uri: \"ftp://h\"}\n", []string{`pipeline.yaml:15:20: tracking[0].uri: "ftp://h" is not an http:// or https:// address`}},
		{"credentials in the uri", "  - {kind: mlflow, uri: \"http://u:p@h\"}\n", []string{`tracking[0].uri: holds credentials; set MLFLOW_TRACKING_TOKEN`}},
		{"artifacts on tensorboard", "  - {kind: tensorboard, dir: tb, artifacts: checkpoints}\n", []string{`pipeline.yaml:15:34: tracking[0].artifacts: tensorboard keeps event files only, not artifacts: set artifacts: checkpoints on an mlflow or wandb entry, or export a checkpoint with rlpipe policy export`}},
		{"artifacts of another value", "  - {kind: mlflow, uri: \"http://h\", artifacts: weights}\n", []string{`pipeline.yaml:15:37: tracking[0].artifacts: "weights" is not what a tracker keeps: write artifacts: checkpoints (the adapter or weights of every evaluated checkpoint), or leave the key out`}},
		{"not a list", "  kind: tensorboard\n", []string{`pipeline.yaml:15:7: tracking: expected a list`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := base + "tracking:\n" + tc.section
			_, err := config.Parse("pipeline.yaml", []byte(src), kinds.Registry())
			if err == nil {
				t.Fatalf("no error for\n%s", tc.section)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got\n%v\nwant it to contain\n%s", err, w)
				}
			}
		})
	}
}

// TestTrackingDirFromFile takes a relative TensorBoard dir from the
// pipeline file's directory, as the store's path is.
func TestTrackingDirFromFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(path, []byte(base+"tracking: [{kind: tensorboard, dir: tb}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, kinds.Registry())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Tracking[0].Options.(*trackers.TensorBoardOptions).Dir; got != filepath.Join(dir, "tb") {
		t.Errorf("dir = %q, want %q", got, filepath.Join(dir, "tb"))
	}
}

// TestTrackingWandb reads a wandb entry's keys, its relative dir and
// python taken from the pipeline file's directory.
func TestTrackingWandb(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pipeline.yaml")
	src := base + "tracking: [{kind: wandb, dir: wb, project: rl, entity: team, python: ../.venv-tracking}]\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, kinds.Registry())
	if err != nil {
		t.Fatal(err)
	}
	want := trackers.WandbOptions{Dir: filepath.Join(dir, "wb"), Project: "rl", Entity: "team", Python: filepath.Join(filepath.Dir(dir), ".venv-tracking")}
	if got, ok := c.Tracking[0].Options.(*trackers.WandbOptions); !ok || *got != want {
		t.Errorf("tracking[0]: %+v, want %+v", c.Tracking[0].Options, want)
	}
	if got := c.Tracking[0].Spec().String(); got != "wandb:"+filepath.Join(dir, "wb") {
		t.Errorf("spec: %s", got)
	}
}

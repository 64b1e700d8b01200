package trackertest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
)

// WandbRun is what wandb's own reader of a run's transaction log (`wandb
// leet inspect --json`, one JSON line per record) shows of one offline
// run directory.
type WandbRun struct {
	ID      string
	Resume  bool
	Config  map[string]any
	History []map[string]any // the rows, in order
	// Metrics are the define_metric records: glob or name → step metric.
	Metrics  map[string]string
	ExitCode *int
	// Artifacts are the artifacts the run logged, in order.
	Artifacts []WandbArtifact
}

// WandbArtifact is an artifact record of a run: its name, type, aliases
// and metadata (JSON), and its files, path → MD5 digest (base64).
type WandbArtifact struct {
	Name, Type string
	Aliases    []string
	Metadata   string
	Files      map[string]string
}

// WandbRuns reads every offline run of W&B run id under dir (dir/wandb/
// offline-run-*-ID), oldest first, with wandb's own reader: what `wandb
// leet inspect --json` runs, the wandb-core binary of the tracker venv's
// wandb, called directly (the wandb command's Python start costs a
// second a read).
func WandbRuns(t testing.TB, dir, id string) []WandbRun {
	t.Helper()
	venv := filepath.Dir(filepath.Dir(Python(t)))
	cores, err := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages", "wandb", "bin", "wandb-core"))
	if err != nil || len(cores) != 1 {
		t.Fatalf("the tracker venv %s has no single wandb/bin/wandb-core (%v, %v): run make deps (scripts/tracker-venv.sh)", venv, cores, err)
	}
	dirs, err := filepath.Glob(filepath.Join(dir, "wandb", "offline-run-*-"+id))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(dirs)
	var out []WandbRun
	for _, d := range dirs {
		files, err := filepath.Glob(filepath.Join(d, "run-*.wandb"))
		if err != nil || len(files) != 1 {
			t.Fatalf("%s: no single run-*.wandb (%v, %v)", d, files, err)
		}
		cmd := exec.Command(cores[0], "leet", "inspect", "--no-observability", "--json", "--run-file", files[0], filepath.Dir(d))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		raw, err := cmd.Output()
		if err != nil {
			t.Fatalf("wandb leet inspect %s: %v\n%s", d, err, stderr.Bytes())
		}
		r := WandbRun{Metrics: map[string]string{}}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec struct {
				Type string `json:"type"`
				Run  struct {
					ID     string `json:"run_id"`
					Resume bool   `json:"resume"`
					Config struct {
						Update map[string]any `json:"update"`
					} `json:"config"`
				} `json:"run"`
				History struct {
					Item map[string]any `json:"item"`
				} `json:"history"`
				Metric struct {
					Name       string `json:"name"`
					Glob       string `json:"glob_name"`
					StepMetric string `json:"step_metric"`
				} `json:"metric"`
				Exit struct {
					Code int `json:"exit_code"`
				} `json:"exit"`
				Artifact struct {
					Name     string   `json:"name"`
					Type     string   `json:"type"`
					Aliases  []string `json:"aliases"`
					Metadata string   `json:"metadata"`
					Manifest struct {
						Contents []struct {
							Path   string `json:"path"`
							Digest string `json:"digest"`
						} `json:"contents"`
					} `json:"manifest"`
				} `json:"artifact"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("wandb leet inspect %s printed %q: %v", d, sc.Bytes(), err)
			}
			switch rec.Type {
			case "run":
				r.ID, r.Resume, r.Config = rec.Run.ID, rec.Run.Resume, rec.Run.Config.Update
				delete(r.Config, "_wandb")
			case "history":
				r.History = append(r.History, rec.History.Item)
			case "metric":
				r.Metrics[rec.Metric.Name+rec.Metric.Glob] = rec.Metric.StepMetric
			case "artifact":
				a := WandbArtifact{Name: rec.Artifact.Name, Type: rec.Artifact.Type, Aliases: rec.Artifact.Aliases,
					Metadata: rec.Artifact.Metadata, Files: map[string]string{}}
				for _, c := range rec.Artifact.Manifest.Contents {
					a.Files[c.Path] = c.Digest
				}
				r.Artifacts = append(r.Artifacts, a)
			case "exit":
				code := rec.Exit.Code
				r.ExitCode = &code
			}
		}
		out = append(out, r)
	}
	return out
}

// Steps are the steps of tag's rows, with their values.
func (r WandbRun) Steps(tag string) [][2]float64 {
	var out [][2]float64
	for _, row := range r.History {
		if v, ok := row[tag].(float64); ok {
			out = append(out, [2]float64{row["_step"].(float64), v})
		}
	}
	return out
}

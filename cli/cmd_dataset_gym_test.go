package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments/datasets"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/rewards/python"
)

// TestDatasetReasoningGym commits two families' problems on a branch and
// writes the same flags to --out: the store's tables are the files' bytes
// (the same flags give the same tables), with the rows asked for, and
// they read back as prompts tables whose splits share no question.
func TestDatasetReasoningGym(t *testing.T) {
	py := pyvenv.Python(t, "generate problems with the real reasoning-gym package")
	h := newStore(t)
	args := []string{"dataset", "reasoning-gym", "chain_sum,basic_arithmetic:3", "--size", "24", "--heldout", "0.25", "--seed", "7",
		"--config", "basic_arithmetic.max_terms=3", "--python", py}
	var got struct {
		Commit      string              `json:"commit"`
		Train       string              `json:"train"`
		Heldout     string              `json:"heldout"`
		TrainRows   int                 `json:"train_rows"`
		HeldoutRows int                 `json:"heldout_rows"`
		Version     string              `json:"version"`
		Families    []datasets.GymCount `json:"families"`
		Seconds     float64             `json:"seconds"`
	}
	h.json(&got, append(append([]string{}, args...), "main")...)
	if got.Train != "main:data/reasoning-gym-train.parquet" || got.Heldout != "main:data/reasoning-gym-heldout.parquet" ||
		got.TrainRows != 18 || got.HeldoutRows != 6 || got.Version != "0.1.25" || got.Commit == "" ||
		!slices.Equal(got.Families, []datasets.GymCount{{Family: "chain_sum", Train: 5, HeldOut: 2}, {Family: "basic_arithmetic", Train: 13, HeldOut: 4}}) {
		t.Fatalf("committed %+v", got)
	}
	out := filepath.Join(h.dir, "out")
	h.ok(append(append([]string{}, args...), "--out", out)...)
	st := h.openStore()
	ctx := context.Background()
	questions := map[string]string{}
	for _, f := range []struct {
		path, file, split string
		rows              int
	}{
		{"data/reasoning-gym-train.parquet", "train.parquet", datasets.GymSplitTrain, 18},
		{"data/reasoning-gym-heldout.parquet", "heldout.parquet", datasets.GymSplitHeldOut, 6},
	} {
		stored, err := artifacts.ReadObject(ctx, st, "main", f.path)
		if err != nil {
			t.Fatal(err)
		}
		written, err := os.ReadFile(filepath.Join(out, f.file))
		if err != nil {
			t.Fatal(err)
		}
		if len(stored) == 0 || !bytes.Equal(stored, written) {
			t.Fatalf("%s on main (%d bytes) is not --out's %s (%d bytes)", f.path, len(stored), f.file, len(written))
		}
		rows, err := tables.Read(bytes.NewReader(stored), int64(len(stored)), f.path, tables.Prompts)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != f.rows {
			t.Fatalf("%s: %d rows, want %d", f.path, len(rows), f.rows)
		}
		for _, r := range rows {
			if r.Split != f.split {
				t.Fatalf("%s: a row of split %q", f.path, r.Split)
			}
			if s, dup := questions[r.Prompt]; dup {
				t.Fatalf("%s repeats a question of the %s split: %q", f.path, s, r.Prompt)
			}
			questions[r.Prompt] = r.Split
		}
	}
}

// TestDatasetReasoningGymUsage: flags that ask for what cannot be are
// usage errors naming the flag; those the generator finds run it (the
// project venv's reasoning-gym).
func TestDatasetReasoningGymUsage(t *testing.T) {
	h := newStore(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no families", nil, "dataset reasoning-gym: missing FAMILIES (rlpipe dataset reasoning-gym --list names them)"},
		{"no destination", []string{"chain_sum"}, "dataset reasoning-gym: missing BRANCH, or --out DIR"},
		{"both destinations", []string{"chain_sum", "main", "--out", "x"}, "dataset reasoning-gym: give BRANCH or --out DIR, not both"},
		{"list with families", []string{"chain_sum", "--list"}, "dataset reasoning-gym: --list takes no families or branch"},
		{"bad heldout", []string{"chain_sum", "main", "--heldout", "half"}, `dataset reasoning-gym: --heldout "half" is neither a count of rows nor a fraction between 0 and 1`},
		{"heldout rounds to none", []string{"chain_sum", "main", "--heldout", "0.001", "--size", "100"}, "dataset reasoning-gym: --heldout 0.001 of --size 100 rounds to 0 held-out rows: give a count, 1 to 99"},
		{"bad weight", []string{"chain_sum:-1", "main"}, `dataset reasoning-gym: family "chain_sum:-1": the weight "-1" is not a positive number`},
		{"bad config", []string{"chain_sum", "main", "--config", "seed=2"}, `dataset reasoning-gym: --config seed=2: "seed" is not a config key here; the seed is --seed and the number of rows --size`},
		{"missing python", []string{"chain_sum", "main", "--python", "/nonexistent/venv"}, "dataset reasoning-gym: --python /nonexistent/venv: no such venv or interpreter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.fails(ExitUsage, []string{"rlpipe: " + tc.want + "\n"}, append([]string{"dataset", "reasoning-gym"}, tc.args...)...)
		})
	}
	py := pyvenv.Python(t, "ask the real reasoning-gym package for its families and configs")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown family", []string{"chain_sums"}, `dataset reasoning-gym: reasoning-gym has no family "chain_sums" (did you mean "chain_sum"?)`},
		{"unknown config key", []string{"chain_sum", "--config", "max_term=3"}, `dataset reasoning-gym: --config max_term=3: reasoning-gym family chain_sum has no config key "max_term" (did you mean "max_terms"?)`},
		{"size too large", []string{"chain_sum", "--size", "100001"}, "dataset reasoning-gym: --size 100001 is out of range: give 2 to 100000 rows (held out and training together)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.fails(ExitUsage, []string{"rlpipe: " + tc.want + "\n"}, append(append([]string{"dataset", "reasoning-gym", "--python", py}, tc.args...), "main")...)
		})
	}
}

// TestProjectPython finds the interpreter --python names, else
// $RLPIPE_PYTHON's, else the nearest .venv-py up from the working
// directory, and says which it could not use.
func TestProjectPython(t *testing.T) {
	root := t.TempDir()
	venv := filepath.Join(root, ".venv-py")
	if err := os.MkdirAll(filepath.Join(venv, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(venv, "bin", "python")
	if err := os.WriteFile(py, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(root, "a", "b")
	empty := filepath.Join(root, "a")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	for _, tc := range []struct {
		name, flag, env, want, wantErr string
	}{
		{name: "nearest .venv-py", want: py},
		{name: "the variable", env: venv, want: py},
		{name: "a venv directory", flag: venv, env: "/elsewhere", want: py},
		{name: "an interpreter", flag: py, want: py},
		{name: "missing", flag: "/nonexistent/venv", wantErr: "--python /nonexistent/venv: no such venv or interpreter"},
		{name: "missing variable", env: "/nonexistent/venv", wantErr: "$RLPIPE_PYTHON /nonexistent/venv: no such venv or interpreter"},
		{name: "not a venv", flag: empty, wantErr: "--python " + empty + ": a directory without bin/python3, so not a venv"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := projectPython(tc.flag, func(k string) string {
				if k == python.EnvPython {
					return tc.env
				}
				return ""
			})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("projectPython = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestDatasetReasoningGymList names every family of the project venv's
// reasoning-gym with its config keys (not seed or size), composite aside.
func TestDatasetReasoningGymList(t *testing.T) {
	py := pyvenv.Python(t, "list the real reasoning-gym package's families")
	h := newHarness(t)
	var got struct {
		Version  string                   `json:"version"`
		Families []datasets.GymFamilyInfo `json:"families"`
	}
	h.json(&got, "dataset", "reasoning-gym", "--list", "--python", py)
	i := slices.IndexFunc(got.Families, func(f datasets.GymFamilyInfo) bool { return f.Name == "chain_sum" })
	if got.Version != "0.1.25" || len(got.Families) != 105 || i < 0 ||
		!slices.Equal(got.Families[i].Keys, []string{"min_terms", "max_terms", "min_digits", "max_digits", "allow_negation"}) ||
		slices.ContainsFunc(got.Families, func(f datasets.GymFamilyInfo) bool { return f.Name == "composite" }) {
		t.Fatalf("--list: %s, %d families, chain_sum %+v", got.Version, len(got.Families), got.Families[max(i, 0)])
	}
}

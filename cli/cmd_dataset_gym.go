package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments/datasets"
	"github.com/rlpipe/rlpipe/rewards/python"
)

type datasetGymOptions struct {
	size        int
	heldout     string
	seed        int64
	config      []string
	python      string
	out         string
	trainPath   string
	heldoutPath string
	list        bool
}

func (o *datasetGymOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.size, "size", 1000, fmt.Sprintf("rows, held out and training together (at most %d)", datasets.MaxGymSize))
	fs.StringVar(&o.heldout, "heldout", "0.1", "held-out rows: a count, or a fraction of --size (rounded)")
	fs.Int64Var(&o.seed, "seed", 1, "reasoning-gym's seed for every family")
	fs.StringArrayVar(&o.config, "config", nil, "a family config key, KEY=VALUE (every family) or FAMILY.KEY=VALUE; repeat for more")
	fs.StringVar(&o.python, "python", "", "the venv or interpreter with reasoning-gym (default $"+python.EnvPython+", else the nearest .venv-py up from the working directory, else python3)")
	fs.StringVar(&o.out, "out", "", "write DIR/train.parquet and DIR/heldout.parquet instead of committing to a branch")
	fs.StringVar(&o.trainPath, "train-path", "data/reasoning-gym-train.parquet", "path of the training prompts table on the branch")
	fs.StringVar(&o.heldoutPath, "heldout-path", "data/reasoning-gym-heldout.parquet", "path of the held-out prompts table on the branch")
	fs.BoolVar(&o.list, "list", false, "list reasoning-gym's families and their config keys")
}

func newDatasetGymCommand(g *rootOptions) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:   "reasoning-gym FAMILY[:WEIGHT][,FAMILY…] [BRANCH | --out DIR] [--size N] [--seed S] [--config K=V]… [--heldout N|FRACTION]",
		Short: "generate reasoning-gym problems as training and held-out prompts tables",
		Long: `Generate problems with reasoning-gym's own generators (the package in the
project venv, run outside the sandbox as a dataset import is) and commit
them as two prompts tables, or write them to --out DIR.

Each family gets its share of --size by weight (1 unless FAMILY:WEIGHT),
first its held-out rows, then its training rows, drawn in the order of
reasoning-gym's indices with --seed and skipping any question already
drawn: held-out and training rows never share a question. Rows keep
reasoning-gym's metadata (source_dataset, source_index, …) in the
metadata column, which examples/reasoning-gym/reward.yaml scores with the
family's own score_answer. The same flags give byte-identical tables.

reasoning-gym draws problem i with the seed S+i, so --seed 2 gives the
problems of --seed 1 shifted by one: take seeds far apart (1, 1000000)
for sets that share nothing.`,
		Example: `  rlpipe dataset reasoning-gym chain_sum main --size 2000 --seed 1
  rlpipe dataset reasoning-gym chain_sum,basic_arithmetic:2 main --config chain_sum.max_terms=3 --heldout 200
  rlpipe dataset reasoning-gym number_sorting --out /tmp/sorting --size 500 --config max_numbers=5
  rlpipe dataset reasoning-gym --list`,
		Args: rangeArgs(0, "FAMILIES", "BRANCH"),
	}, func(cmd *cobra.Command, o datasetGymOptions, args []string) error {
		python, err := projectPython(o.python, g.env.getenv)
		if err != nil {
			return usagef("dataset reasoning-gym: %v", err)
		}
		p := g.printer(cmd)
		if o.list {
			if len(args) > 0 {
				return usagef("dataset reasoning-gym: --list takes no families or branch")
			}
			return datasetGymList(cmd.Context(), python, p)
		}
		switch {
		case len(args) == 0:
			return usagef("dataset reasoning-gym: missing FAMILIES (rlpipe dataset reasoning-gym --list names them)")
		case len(args) == 1 && o.out == "":
			return usagef("dataset reasoning-gym: missing BRANCH, or --out DIR")
		case len(args) == 2 && o.out != "":
			return usagef("dataset reasoning-gym: give BRANCH or --out DIR, not both")
		}
		fams, err := datasets.ParseGymFamilies(args[0])
		if err != nil {
			return usagef("dataset reasoning-gym: %v", err)
		}
		for _, c := range o.config {
			if err := datasets.SetGymConfig(fams, c); err != nil {
				return usagef("dataset reasoning-gym: %v", err)
			}
		}
		held, err := heldOutCount(o.heldout, o.size)
		if err != nil {
			return usagef("dataset reasoning-gym: %v", err)
		}
		gym := &datasets.GymOptions{Python: python, Families: fams, Size: o.size, HeldOut: held, Seed: o.seed}
		start := time.Now()
		set, err := datasets.Gym(cmd.Context(), gym)
		if errors.Is(err, datasets.ErrInvalid) { // the flags asked for what cannot be
			return asUsage(fmt.Errorf("dataset reasoning-gym: %w", err))
		}
		if err != nil {
			return failure(fmt.Errorf("dataset reasoning-gym: %w", err))
		}
		secs := time.Since(start).Seconds()
		if o.out != "" {
			return datasetGymOut(o.out, set, secs, p)
		}
		return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
			return datasetGymPut(ctx, st, args[1], o, gym, set, secs, p)
		})
	})
}

// heldOutCount reads --heldout: a count, or a fraction of size.
func heldOutCount(s string, size int) (int, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0 && f < 1) {
		return 0, fmt.Errorf("--heldout %q is neither a count of rows nor a fraction between 0 and 1", s)
	}
	n := int(math.Round(f * float64(size)))
	if size >= 2 && (n < 1 || n >= size) { // a --size out of range is the generator's to report
		return 0, fmt.Errorf("--heldout %s of --size %d rounds to %d held-out rows: give a count, 1 to %d", s, size, n, size-1)
	}
	return n, nil
}

// projectPython is the interpreter --python names: a venv directory or an
// interpreter; by default $RLPIPE_PYTHON's (as for a reward spec's
// functions), else the project venv (the nearest .venv-py in the working
// directory or above it: the generator needs reasoning-gym, which
// python3 on PATH seldom has), else python3.
func projectPython(flag string, getenv func(string) string) (string, error) {
	venv, from := flag, "--python"
	if venv == "" {
		venv, from = getenv(python.EnvPython), "$"+python.EnvPython
	}
	if venv == "" {
		dir, err := os.Getwd()
		for err == nil {
			if _, serr := os.Stat(filepath.Join(dir, ".venv-py", "bin", "python")); serr == nil {
				return filepath.Join(dir, ".venv-py", "bin", "python"), nil
			}
			up := filepath.Dir(dir)
			if up == dir {
				break
			}
			dir = up
		}
		if _, err := exec.LookPath("python3"); err != nil {
			return "", fmt.Errorf("no .venv-py in the working directory or above it, and no python3 on PATH: give --python a venv with reasoning-gym")
		}
		return "python3", nil
	}
	if !strings.ContainsRune(venv, '/') {
		if _, err := os.Stat(venv); err != nil { // a name on PATH: python3
			if p, err := exec.LookPath(venv); err == nil {
				return p, nil
			}
		}
	}
	py, err := python.InterpreterIn(venv)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s %s: no such venv or interpreter", from, venv)
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %v", from, venv, err)
	}
	return py, nil
}

func datasetGymList(ctx context.Context, python string, p printer) error {
	fams, version, err := datasets.GymFamilies(ctx, python)
	if err != nil {
		return failure(fmt.Errorf("dataset reasoning-gym --list: %w", err))
	}
	if p.json {
		return p.JSON(map[string]any{"version": version, "families": fams})
	}
	if err := p.Printf("reasoning-gym %s: %d families (--config keys after each)\n", version, len(fams)); err != nil {
		return err
	}
	for _, f := range fams {
		if err := p.Printf("  %s: %s\n", f.Name, strings.Join(f.Keys, ", ")); err != nil {
			return err
		}
	}
	return nil
}

// gymCounts says how many rows each family got: "chain_sum 450+50".
func gymCounts(set *datasets.GymSet) string {
	parts := make([]string, len(set.Counts))
	for i, c := range set.Counts {
		parts[i] = fmt.Sprintf("%s %d+%d", c.Family, c.Train, c.HeldOut)
	}
	return strings.Join(parts, ", ")
}

func datasetGymOut(dir string, set *datasets.GymSet, secs float64, p printer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return failure(fmt.Errorf("dataset reasoning-gym: %w", err))
	}
	train, held := filepath.Join(dir, "train.parquet"), filepath.Join(dir, "heldout.parquet")
	for _, f := range []struct {
		path string
		rows []tables.Prompt
	}{{train, set.Train}, {held, set.HeldOut}} {
		var buf bytes.Buffer
		if err := tables.Write(&buf, tables.Prompts, f.rows, nil); err != nil {
			return failure(fmt.Errorf("dataset reasoning-gym: write %s: %w", f.path, err))
		}
		if err := os.WriteFile(f.path, buf.Bytes(), 0o644); err != nil {
			return failure(fmt.Errorf("dataset reasoning-gym: %w", err))
		}
	}
	return p.Result(map[string]any{"train": train, "heldout": held, "train_rows": len(set.Train), "heldout_rows": len(set.HeldOut),
		"version": set.Version, "families": set.Counts, "seconds": secs},
		"wrote %d training rows to %s and %d held out to %s (%s; reasoning-gym %s, %.1fs)\n",
		len(set.Train), train, len(set.HeldOut), held, gymCounts(set), set.Version, secs)
}

func datasetGymPut(ctx context.Context, st artifacts.Store, branch string, o datasetGymOptions, gym *datasets.GymOptions, set *datasets.GymSet, secs float64, p printer) error {
	// The config hash covers what decides the rows: families, weights,
	// config, sizes and seed.
	b, err := json.Marshal(map[string]any{"families": gym.Families, "size": gym.Size, "heldout": gym.HeldOut, "seed": gym.Seed})
	if err != nil {
		return failure(err)
	}
	sum := sha256.Sum256(b)
	prov := func(split string) artifacts.Provenance {
		return artifacts.Provenance{Task: "dataset reasoning-gym", TaskVersion: split, Seed: &o.seed,
			Inputs: map[string]string{"reasoning-gym": set.Version}, ConfigHash: "sha256:" + hex.EncodeToString(sum[:])}
	}
	if _, err := datasets.Put(ctx, st, branch, o.trainPath, set.Train, &datasets.PutOptions{NoCommit: true, Provenance: prov("train")}); err != nil {
		return failure(err)
	}
	c, err := datasets.Put(ctx, st, branch, o.heldoutPath, set.HeldOut, &datasets.PutOptions{Provenance: prov("heldout"),
		Message: fmt.Sprintf("dataset reasoning-gym: %s (seed %d, reasoning-gym %s)", gymCounts(set), o.seed, set.Version)})
	if err != nil {
		return failure(err)
	}
	return p.Result(map[string]any{"commit": c.ID, "train": branch + ":" + o.trainPath, "heldout": branch + ":" + o.heldoutPath,
		"train_rows": len(set.Train), "heldout_rows": len(set.HeldOut), "version": set.Version, "families": set.Counts, "seconds": secs},
		"committed %s on %s: %d training rows at %s, %d held out at %s (%s; reasoning-gym %s, %.1fs)\n",
		shortID(c.ID), branch, len(set.Train), o.trainPath, len(set.HeldOut), o.heldoutPath, gymCounts(set), set.Version, secs)
}

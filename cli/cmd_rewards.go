package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/runners"
)

func newRewardsCommand(g *rootOptions) *cobra.Command {
	c := &cobra.Command{Use: "rewards", Short: "work with reward specs"}
	c.AddCommand(newRewardsCheckCommand(g))
	return c
}

type rewardsCheckOptions struct {
	sample string
	rows   int64
}

func (o *rewardsCheckOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.sample, "sample", "", "also score the first rows of this trajectories table (REF:PATH); prompts.parquet beside it is joined")
	fs.Int64Var(&o.rows, "rows", 5, "how many rows --sample scores")
}

func newRewardsCheckCommand(g *rootOptions) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:   "check SPEC.yaml [--sample REF:PATH]",
		Short: "validate a reward spec, and optionally score a few stored rows with it",
		Long: `Parse and type-check a reward spec (components, weights, total,
verifiers, judges) and report problems with the spec's file, line and
column. With --sample, score the first --rows rows of a stored
trajectories table (verifiers and judges run for real, without memo) and
print them; nothing is written to the store.`,
		Example: "  rlpipe rewards check reward.yaml\n  rlpipe rewards check reward.yaml --sample runs-exp1:iterations/000003/trajectories.parquet",
		Args:    exactArgs("SPEC.yaml"),
	}, func(cmd *cobra.Command, o rewardsCheckOptions, args []string) error {
		spec, err := rewards.LoadSpec(args[0])
		var prog *rewards.Program
		if err == nil {
			prog, err = runners.Compile(spec)
		}
		if err != nil {
			return failure(err)
		}
		p := g.printer(cmd)
		if o.sample == "" {
			if p.json {
				return p.JSON(map[string]any{"spec": spec.Name, "digest": spec.Digest(), "components": spec.ComponentNames(),
					"correct": spec.Correctness().String(), "ok": true})
			}
			return p.Printf("%s: ok, %s, correct when %s, digest %s\n", spec.Name, plural(len(spec.Components), "component"),
				spec.Correctness(), spec.Digest())
		}
		a, err := parseArtifact(o.sample)
		if err != nil {
			return err
		}
		return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
			return rewardsSample(ctx, st, prog, a, o.rows, p)
		})
	})
}

// download copies an object into a temporary file (digest-checked).
func download(ctx context.Context, st artifacts.Store, a artifactArg) (*os.File, int64, error) {
	f, err := os.CreateTemp("", "rlpipe-sample-*.parquet")
	if err != nil {
		return nil, 0, err
	}
	os.Remove(f.Name()) // unlinked: gone when closed
	n, err := copyObject(ctx, st, a, f, "read")
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, n, nil
}

func rewardsSample(ctx context.Context, st artifacts.Store, prog *rewards.Program, a artifactArg, rows int64, p printer) error {
	spec := prog.Spec()
	src, size, err := download(ctx, st, a)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := sampleIsTrajectories(src, size, a); err != nil {
		return err
	}
	so := &rewards.ScoreOptions{Name: a.String(), Limit: rows}
	pa := artifactArg{ref: a.ref, path: path.Join(path.Dir(a.path), runs.PromptsFile)}
	if pf, psize, err := download(ctx, st, pa); err == nil {
		so.Prompts, err = prog.ReadPrompts(ctx, pf, psize, pa.String())
		pf.Close()
		if err != nil {
			return failure(err)
		}
	} else if !errors.Is(err, artifacts.ErrNotFound) {
		return err
	}
	var out bytes.Buffer
	sum, err := prog.ScoreFile(ctx, &out, src, size, so)
	if errors.Is(err, rewards.ErrNoPrompts) {
		var cols []string
		for _, v := range prog.Variables() {
			if slices.Contains(promptColumns, v) {
				cols = append(cols, v)
			}
		}
		return failure(explain(err, "rewards check --sample %s: the spec reads the prompts table (%s) and there is no %s beside the sample to join: "+
			"sample a run's trajectories, where the prompts sit beside them (e.g. --sample %s:%s), "+
			"or put the prompts there (rlpipe import prompts.jsonl %s --table prompts)",
			a, strings.Join(cols, ", "), pa, runs.Branch("NAME"), runs.IterationPath(1, runs.TrajectoriesFile), pa))
	}
	if err != nil {
		return failure(err)
	}
	scored, err := tables.Read(bytes.NewReader(out.Bytes()), int64(out.Len()), "rewards", tables.Rewards)
	if err != nil {
		return err
	}
	if p.json {
		return p.JSON(map[string]any{"spec": spec.Name, "digest": spec.Digest(), "sample": a.String(), "summary": sum, "rows": scored})
	}
	names := spec.ComponentNames()
	sort.Strings(names)
	header := append([]string{"PROMPT", "SAMPLE"}, names...)
	header = append(header, "TOTAL", "STATUS", "ERROR")
	t := newTable(header...)
	for _, r := range scored {
		cells := []string{r.PromptID, fmt.Sprint(r.SampleIndex)}
		for _, n := range names {
			if v, ok := r.Components[n]; ok {
				cells = append(cells, fmt.Sprintf("%g", v))
			} else {
				cells = append(cells, "null")
			}
		}
		total := "NaN"
		if !math.IsNaN(r.Total) {
			total = fmt.Sprintf("%g", r.Total)
		}
		errText := ""
		if r.Error != nil {
			errText = *r.Error
		}
		t.add(append(cells, total, r.Status, errText)...)
	}
	if err := t.write(p.w); err != nil {
		return err
	}
	if err := p.Printf("%d rows: %d scored, %d skipped, %d errors, %d nonfinite\n", sum.Rows, sum.Scored, sum.Skipped, sum.Errors, sum.Nonfinite); err != nil {
		return err
	}
	return allRowsFailed(sum, a)
}

// promptColumns are the variables of a spec that come from the prompts
// table (rewards.ErrNoPrompts).
var promptColumns = []string{"prompt", "messages", "answer", "metadata"}

// errAllRowsFailed: rewards check --sample scored rows and every one
// failed, so the spec cannot score this data; the command exits 1.
var errAllRowsFailed = errors.New("every sampled row failed")

// allRowsFailed is errAllRowsFailed, explained, when every row of a
// sample failed (status error or nonfinite), else nil.
func allRowsFailed(sum rewards.Summary, a artifactArg) error {
	if sum.Rows == 0 || sum.Errors+sum.Nonfinite < sum.Rows {
		return nil
	}
	first := ""
	if len(sum.FirstErrors) > 0 {
		e := sum.FirstErrors[0]
		first = fmt.Sprintf("; the first, prompt %s sample %d: %s", e.PromptID, e.SampleIndex, e.Message)
	}
	return failure(explain(errAllRowsFailed, "rewards check --sample %s: all %d rows failed (%d errors, %d nonfinite)%s: "+
		"the spec cannot score this sample; fix what the ERROR column says and check again", a, sum.Rows, sum.Errors, sum.Nonfinite, first))
}

// sampleIsTrajectories refuses a --sample that is not a trajectories
// table (a prompts table is the usual mistake), before anything is
// scored.
func sampleIsTrajectories(src *os.File, size int64, a artifactArg) error {
	f, err := tables.OpenFile(src, size, a.String(), nil)
	if err != nil {
		return failure(err)
	}
	name, _ := f.Table()
	if name == "" || name == tables.Trajectories.Name() {
		return nil
	}
	return failure(explain(artifacts.ErrInvalid, "rewards check --sample %s: that is a %s table; --sample scores a trajectories table, "+
		"such as a run's %[3]s:%[4]s (`rlpipe ls %[3]s:%[5]s/` lists one)",
		a, name, runs.Branch("NAME"), runs.IterationPath(1, runs.TrajectoriesFile), runs.IterationDir(1)))
}

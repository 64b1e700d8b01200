package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"sort"

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
	return p.Printf("%d rows: %d scored, %d skipped, %d errors, %d nonfinite\n", sum.Rows, sum.Scored, sum.Skipped, sum.Errors, sum.Nonfinite)
}

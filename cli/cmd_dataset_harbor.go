package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments/datasets"
	"github.com/rlpipe/rlpipe/environments/harbor"
)

type datasetHarborOptions struct {
	path string
	out  string
}

func (o *datasetHarborOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.path, "path", "data/harbor-tasks.parquet", "path of the prompts table on the branch")
	fs.StringVar(&o.out, "out", "", "write the prompts table to this Parquet file instead of committing it")
}

func newDatasetHarborCommand(g *rootOptions) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:   "harbor DIR [BRANCH | --out FILE] [--path P]",
		Short: "put a directory of Harbor tasks on a branch as a prompts table",
		Long: `Read a directory of Harbor tasks (each a subdirectory with task.toml,
instruction.md, environment/Dockerfile and tests/test.sh; DIR may be one
task) and commit one prompt per task: instruction.md as the prompt, the
task's name ([task] name, else its directory) as the prompt id, and
{"harbor_task": NAME, "path": DIR} as the metadata. An episodes stage with
rl_env: harbor and rl_options: {tasks: DIR} plays them (docs/ROLLOUTS.md,
"Bring your environment").

A task whose Dockerfile or task.toml asks for what rlpipe's sandbox cannot
give (an instruction besides FROM, WORKDIR, ENV, COPY and RUN, a RUN that
needs apt-get, pip, the network or a program the host lacks, a prebuilt
image, GPUs, several steps) is left out, and its file, line and reason
listed; the command fails when no task is left.`,
		Example: `  rlpipe dataset harbor tasks main
  rlpipe dataset harbor tasks main --path data/tasks.parquet
  rlpipe dataset harbor tasks --out /tmp/tasks.parquet`,
		Args: rangeArgs(1, "DIR", "BRANCH"),
	}, func(cmd *cobra.Command, o datasetHarborOptions, args []string) error {
		switch {
		case len(args) == 1 && o.out == "":
			return usagef("dataset harbor: missing BRANCH, or --out FILE")
		case len(args) == 2 && o.out != "":
			return usagef("dataset harbor: give BRANCH or --out FILE, not both")
		}
		tasks, refused, err := harbor.LoadDir(args[0])
		if errors.Is(err, harbor.ErrTask) {
			return asUsage(fmt.Errorf("dataset harbor: %w", err))
		}
		if err != nil {
			return failure(fmt.Errorf("dataset harbor: %w", err))
		}
		rows, err := harbor.Prompts(tasks, args[0])
		if err != nil {
			return failure(fmt.Errorf("dataset harbor: %w", err))
		}
		p := g.printer(cmd)
		reasons := make([]string, len(refused))
		for i, r := range refused {
			reasons[i] = r.Error()
		}
		if o.out != "" {
			var buf bytes.Buffer
			if err := tables.Write(&buf, tables.Prompts, rows, nil); err != nil {
				return failure(fmt.Errorf("dataset harbor: write %s: %w", o.out, err))
			}
			if err := os.WriteFile(o.out, buf.Bytes(), 0o644); err != nil {
				return failure(fmt.Errorf("dataset harbor: %w", err))
			}
			return datasetHarborReport(p, map[string]any{"out": o.out, "tasks": len(rows), "refused": reasons},
				fmt.Sprintf("wrote %d tasks to %s", len(rows), o.out), reasons)
		}
		return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
			abs, _ := filepath.Abs(args[0])
			c, err := datasets.Put(ctx, st, args[1], o.path, rows, &datasets.PutOptions{
				Message:    fmt.Sprintf("dataset harbor: %d tasks from %s", len(rows), filepath.Base(abs)),
				Provenance: artifacts.Provenance{Task: "dataset harbor"}})
			if err != nil {
				return failure(err)
			}
			return datasetHarborReport(p, map[string]any{"commit": c.ID, "prompts": args[1] + ":" + o.path, "tasks": len(rows), "refused": reasons},
				fmt.Sprintf("committed %s on %s: %d tasks at %s", shortID(c.ID), args[1], len(rows), o.path), reasons)
		})
	})
}

// datasetHarborReport prints the result, then each refused task's reason.
func datasetHarborReport(p printer, v map[string]any, line string, refused []string) error {
	if p.json {
		return p.JSON(v)
	}
	if len(refused) > 0 {
		line += fmt.Sprintf(" (%d refused)", len(refused))
	}
	if err := p.Printf("%s\n", line); err != nil {
		return err
	}
	for _, r := range refused {
		if err := p.Printf("refused: %s\n", r); err != nil {
			return err
		}
	}
	return nil
}

package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/environments/arith"
	"github.com/rlpipe/rlpipe/environments/datasets"
)

func newDatasetCommand(g *rootOptions) *cobra.Command {
	return newGroupCommand("dataset", "put datasets of verifiable problems into the store",
		newDatasetArithCommand(g), newDatasetImportCommand(g), newDatasetGymCommand(g), newDatasetHarborCommand(g))
}

type datasetArithOptions struct {
	train, heldout int
	seed           int64
	trainPath      string
	heldoutPath    string
}

func (o *datasetArithOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.train, "train", 4096, "distinct training problems (never held out)")
	fs.IntVar(&o.heldout, "heldout", 500, "held-out problems, the first of the fixed held-out order")
	fs.Int64Var(&o.seed, "seed", 1, "seed of the training draw")
	fs.StringVar(&o.trainPath, "train-path", "data/arith-train.parquet", "path of the training prompts table")
	fs.StringVar(&o.heldoutPath, "heldout-path", "data/arith-heldout.parquet", "path of the held-out prompts table")
}

func newDatasetArithCommand(g *rootOptions) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:   "arith BRANCH [--train N] [--heldout M] [--seed S]",
		Short: "put the arithmetic task's training and held-out sets on a branch",
		Long: `Write the "a+b=" task (operands 0–999) as two prompts tables and commit them:
N distinct training problems drawn with the seed, none of them held out, and
the first M problems of the fixed held-out order. The split rule is the one
the embedded model's pretraining excluded (docs/ROLLOUTS.md), so the
held-out set is unseen by the shipped weights and disjoint from training.`,
		Example: `  rlpipe dataset arith main
  rlpipe dataset arith main --train 20000 --heldout 2000 --seed 7`,
		Args: exactArgs("BRANCH"),
	}, func(cmd *cobra.Command, o datasetArithOptions, args []string) error {
		// Past the distinct training problems the draw below would never end.
		maxTrain := (arith.MaxOperand+1)*(arith.MaxOperand+1) - arith.NumHeldOut()
		if o.train < 1 || o.train > maxTrain || o.heldout < 1 || o.heldout > arith.NumHeldOut() {
			return usagef("dataset arith: --train must be in 1..%d and --heldout in 1..%d", maxTrain, arith.NumHeldOut())
		}
		return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
			return datasetArith(ctx, st, args[0], o, g.printer(cmd))
		})
	})
}

func datasetArith(ctx context.Context, st artifacts.Store, branch string, o datasetArithOptions, p printer) error {
	// Draws repeat; keep the first occurrence of each problem.
	s := arith.NewSampler(o.seed)
	seen := map[arith.Problem]bool{}
	var train []arith.Problem
	for len(train) < o.train {
		pr := s.Next()
		if !seen[pr] {
			seen[pr] = true
			train = append(train, pr)
		}
	}
	src := fmt.Sprintf("arith seed %d", o.seed)
	if _, err := datasets.Put(ctx, st, branch, o.trainPath, arith.Rows(train), &datasets.PutOptions{NoCommit: true,
		Provenance: artifacts.Provenance{Task: "dataset arith", TaskVersion: "train", Seed: &o.seed}}); err != nil {
		return failure(err)
	}
	c, err := datasets.Put(ctx, st, branch, o.heldoutPath, arith.Rows(arith.HeldOutSet(o.heldout)), &datasets.PutOptions{
		Message:    fmt.Sprintf("dataset arith: %d training problems (%s), %d held out", o.train, src, o.heldout),
		Provenance: artifacts.Provenance{Task: "dataset arith", TaskVersion: "heldout"}})
	if err != nil {
		return failure(err)
	}
	if p.json {
		return p.JSON(map[string]any{"commit": c.ID, "train": branch + ":" + o.trainPath, "heldout": branch + ":" + o.heldoutPath,
			"train_rows": o.train, "heldout_rows": o.heldout})
	}
	return p.Printf("committed %s on %s: %d training problems at %s, %d held out at %s\n",
		shortID(c.ID), branch, o.train, o.trainPath, o.heldout, o.heldoutPath)
}

type datasetImportOptions struct {
	format   string
	question string
	answer   string
	messages string
	id       string
	noAnswer bool
	split    string
	name     string
	revision string
}

func (o *datasetImportOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.format, "answer-format", "", `"gsm8k" parses "#### n" answers (the reasoning goes to metadata); "" keeps answers as they are`)
	fs.StringVar(&o.question, "question", "", "the question column (default question)")
	fs.StringVar(&o.answer, "answer", "", "the answer column (default answer)")
	fs.StringVar(&o.messages, "messages", "", "a column of chat messages ({role, content} list) to use as the prompt; without --question no question column is read")
	fs.StringVar(&o.id, "id", "", "an id column (default: a hash of the question)")
	fs.BoolVar(&o.noAnswer, "no-answer", false, "read no answer column: tasks an environment or a verifier judges (an agent's tasks); every other column goes to metadata")
	fs.StringVar(&o.split, "split", "", "the rows' split (default train); for a Hugging Face dataset directory, also the split read")
	fs.StringVar(&o.name, "name", "", "a Hugging Face dataset's name in the rows' source (default: from the directory)")
	fs.StringVar(&o.revision, "revision", "", "a Hugging Face dataset's revision in the rows' source (default: the snapshot's commit or the saved fingerprint)")
}

func newDatasetImportCommand(g *rootOptions) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:   "import FILE|DIR REF:PATH [--answer-format gsm8k] [--question COL --answer COL | --messages COL]",
		Short: "import a question/answer dataset (JSONL, Parquet, a Hugging Face dataset) as a prompts table",
		Long: `Load a dataset in the common question/answer shape from JSONL or Parquet,
map its columns, parse GSM8K-style "#### n" answers if asked, and commit it
as a prompts table with the source file's SHA-256 as provenance. Errors name
the file, the line (JSONL) or row (Parquet) and the column.

DIR is a Hugging Face dataset: a directory written by datasets'
save_to_disk (a Dataset or a DatasetDict), or a dataset repository
snapshot (data/<split>-*.parquet, as the hub cache keeps it under
datasets--ORG--NAME/snapshots/REV). --split picks the split (default
train). Each row's source is NAME@REVISION: the dataset's name and the
snapshot's commit, or the fingerprint save_to_disk recorded; the
provenance holds every data file's SHA-256.`,
		Example: `  rlpipe dataset import gsm8k-train.jsonl main:data/gsm8k-train.parquet --answer-format gsm8k
  rlpipe dataset import math.parquet main:data/math.parquet --question problem --answer solution
  rlpipe dataset import ./gsm8k-saved main:data/gsm8k-test.parquet --split test --answer-format gsm8k
  rlpipe dataset import ~/.cache/huggingface/hub/datasets--openai--gsm8k/snapshots/e53f0488… main:data/gsm8k.parquet --answer-format gsm8k
  rlpipe dataset import ./chat-saved main:data/chat.parquet --messages messages --answer answer
  rlpipe dataset import examples/agent-sandbox/tasks.jsonl main:data/agent-tasks.parquet --id id --question instruction --no-answer`,
		Args: exactArgs("FILE", "REF:PATH"),
	}, func(cmd *cobra.Command, o datasetImportOptions, args []string) error {
		branch, path, err := artifacts.SplitArtifact(args[1])
		if err != nil || path == "" {
			return usagef("dataset import: %q is not BRANCH:PATH", args[1])
		}
		return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
			lo := datasets.Options{Fields: datasets.Fields{ID: o.id, Question: o.question, Answer: o.answer, Messages: o.messages, NoAnswer: o.noAnswer},
				AnswerFormat: o.format, Split: o.split}
			p := g.printer(cmd)
			if fi, err := os.Stat(args[0]); err == nil && fi.IsDir() {
				hf := &datasets.HFOptions{Split: o.split, Name: o.name, Revision: o.revision}
				c, n, d, err := datasets.ImportHF(ctx, st, branch, path, args[0], hf, &datasets.ImportOptions{Load: lo})
				if err != nil {
					return failure(err)
				}
				if p.json {
					return p.JSON(map[string]any{"commit": c.ID, "rows": n, "path": args[1], "source": d.Source(), "split": d.Split,
						"layout": d.Layout, "files": d.Files})
				}
				return p.Printf("committed %s: %d prompts of %s (split %s, %d files) at %s\n", shortID(c.ID), n, d.Source(), d.Split, len(d.Files), args[1])
			}
			if o.name != "" || o.revision != "" {
				return usagef("dataset import: --name and --revision are for a Hugging Face dataset directory; %s is a file", args[0])
			}
			c, n, err := datasets.Import(ctx, st, branch, path, args[0], &datasets.ImportOptions{Load: lo})
			if err != nil {
				return failure(err)
			}
			return p.Result(map[string]any{"commit": c.ID, "rows": n, "path": args[1]}, "committed %s: %d prompts at %s\n", shortID(c.ID), n, args[1])
		})
	})
}

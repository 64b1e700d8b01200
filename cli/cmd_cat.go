package cli

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
)

type catOptions struct {
	raw   bool
	limit int
}

func (o *catOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.raw, "raw", false, "print a Parquet file's bytes instead of its rows")
	fs.IntVarP(&o.limit, "limit", "n", 0, "print at most N rows of a Parquet table (0: all)")
}

func newCatCommand(g *rootOptions) *cobra.Command {
	return storeCommand(g, &cobra.Command{
		Use:   "cat REF:PATH",
		Short: "print an object: a Parquet table as rows, anything else as raw bytes",
		Long: `Print the object at PATH in REF. A Parquet file prints as an aligned table
(with -o json, one JSON object per row in an array); any other file prints
its bytes unchanged. The whole object is read and checked against its
stored digest before anything is printed (in memory up to 32 MiB, in a
temporary file past it): a damaged object prints nothing.`,
		Example: "  rlpipe cat main:data/prompts.parquet\n  rlpipe cat main:data/prompts.parquet -o json --limit 5\n  rlpipe cat v1.0:config/reward.yaml",
		Args:    exactArgs("REF:PATH"),
	}, func(ctx context.Context, st artifacts.Store, o catOptions, args []string, p printer) error {
		return catFunc(ctx, st, o, args[0], p)
	})
}

func catFunc(ctx context.Context, st artifacts.Store, o catOptions, arg string, p printer) error {
	if o.limit < 0 {
		return usagef("invalid --limit %d: use 0 (all) or more", o.limit)
	}
	a, err := parseObjectArtifact(arg)
	if err != nil {
		return err
	}
	if isParquet(a.path) && !o.raw {
		t, err := openStoredTable(ctx, st, a)
		if err != nil {
			return err
		}
		defer t.Close()
		if p.json {
			return writeTableJSON(ctx, p.w, t.File, o.limit)
		}
		return writeTableText(ctx, p.w, t.File, o.limit)
	}
	// Checked whole before the first byte is written: a damaged object
	// writes nothing.
	_, err = writeVerified(ctx, st, a, p.w, "cat")
	return err
}

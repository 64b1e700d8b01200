package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
)

type revertOptions struct {
	parentNumber int
	commitFlags
}

func (o *revertOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.parentNumber, "parent-number", 0, "for a merge commit, the parent (1-based) to revert to (default 1)")
	o.commitFlags.AddFlags(fs)
}

func newRevertCommand(g *rootOptions) *cobra.Command {
	return storeCommand(g, &cobra.Command{
		Use:     "revert BRANCH REF",
		Short:   "undo a commit on a branch by committing its inverse",
		Example: "  rlpipe revert main 3f2a9c0d\n  rlpipe revert main main~1 --parent-number 1",
		Args:    exactArgs("BRANCH", "REF"),
	}, func(ctx context.Context, st artifacts.Store, o revertOptions, args []string, p printer) error {
		return revertFunc(ctx, st, o, args[0], args[1], p)
	})
}

func revertFunc(ctx context.Context, st artifacts.Store, o revertOptions, branch, ref string, p printer) error {
	if o.parentNumber < 0 {
		return usagef("invalid --parent-number %d: parents count from 1", o.parentNumber)
	}
	if err := parseRef(ref); err != nil {
		return err
	}
	opts, err := o.options()
	if err != nil {
		return err
	}
	r, ok := st.(artifacts.Reverter)
	if !ok {
		return fmt.Errorf("revert %s on %s: %w: this store cannot revert", ref, branch, artifacts.ErrNotSupported)
	}
	c, err := r.Revert(ctx, branch, ref, o.parentNumber, opts)
	switch {
	case errors.Is(err, artifacts.ErrDirtyBranch):
		return explainDirty(err, fmt.Sprintf("revert %s on %s", ref, branch), branch, "")
	case errors.Is(err, artifacts.ErrMergeConflict):
		return explain(err, "revert %s on %s: later commits changed the same paths: %v", ref, branch, err)
	case err != nil:
		return withOp(err, "revert %s on %s", ref, branch)
	}
	return p.Result(c, "reverted %s on %s: commit %s\n", ref, branch, shortID(c.ID))
}

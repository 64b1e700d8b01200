package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
)

type mergeOptions struct {
	strategy string
	message  string
	commitFlags
}

func (o *mergeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.strategy, "strategy", "", "resolve conflicts: source-wins or dest-wins (default: fail on conflict)")
	fs.StringVarP(&o.message, "message", "m", "", "merge commit message (default: \"merge SOURCE into DEST\")")
	o.commitFlags.AddFlags(fs)
}

func newMergeCommand(g *rootOptions) *cobra.Command {
	return storeCommand(g, &cobra.Command{
		Use:   "merge SOURCE DEST [--strategy source-wins|dest-wins] [-m MSG]",
		Short: "merge a ref into a branch (three-way, with conflict detection)",
		Long: `Merge SOURCE (any ref) into the branch DEST with a three-way merge and
record a merge commit. DEST must have no uncommitted changes. A path changed
differently on both sides is a conflict: the merge stops and lists the paths,
unless --strategy picks a side.`,
		Example: "  rlpipe merge try-reward main\n  rlpipe merge try-reward main --strategy source-wins -m \"adopt the new reward\"",
		Args:    exactArgs("SOURCE", "DEST"),
	}, func(ctx context.Context, st artifacts.Store, o mergeOptions, args []string, p printer) error {
		return mergeFunc(ctx, st, o, args[0], args[1], p)
	})
}

func mergeFunc(ctx context.Context, st artifacts.Store, o mergeOptions, source, dest string, p printer) error {
	strategy := artifacts.MergeStrategy(o.strategy)
	switch strategy {
	case artifacts.StrategyNone, artifacts.StrategySourceWins, artifacts.StrategyDestWins:
	default:
		return usagef("invalid --strategy %q: use source-wins or dest-wins", o.strategy)
	}
	for _, r := range []string{source, dest} {
		if err := parseRef(r); err != nil {
			return err
		}
	}
	copts, err := o.options()
	if err != nil {
		return err
	}
	m, ok := st.(artifacts.Merger)
	if !ok {
		return fmt.Errorf("merge %s into %s: %w: this store cannot merge", source, dest, artifacts.ErrNotSupported)
	}
	msg := o.message
	if msg == "" {
		msg = fmt.Sprintf("merge %s into %s", source, dest)
	}
	c, err := m.Merge(ctx, source, dest, &artifacts.MergeOptions{
		Message:    msg,
		Metadata:   copts.Metadata,
		Strategy:   strategy,
		AllowEmpty: copts.AllowEmpty,
		Committer:  copts.Committer,
		Date:       copts.Date,
	})
	var conflict *artifacts.MergeConflictError
	switch {
	case errors.As(err, &conflict):
		return explainConflict(err, conflict, source, dest)
	case errors.Is(err, artifacts.ErrDirtyBranch):
		return explainDirty(err, fmt.Sprintf("merge %s into %s", source, dest), dest, fmt.Sprintf("(`rlpipe diff %s` lists them)", dest))
	case errors.Is(err, artifacts.ErrNoChanges):
		return explain(err, "nothing to merge: %s already has everything %s committed (pass --allow-empty to record a merge commit anyway)", dest, source)
	case errors.Is(err, artifacts.ErrReadOnlyRef):
		return explain(err, "merge into %s: %s is not a branch; merges go into a branch", dest, dest)
	case err != nil:
		return withOp(err, "merge %s into %s", source, dest)
	}
	return p.Result(c, "merged %s into %s: commit %s\n", source, dest, shortID(c.ID))
}

// explainConflict lists every conflicting path and how to resolve them.
func explainConflict(err error, c *artifacts.MergeConflictError, source, dest string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "merge %s into %s: %s changed on both sides:\n", source, dest, plural(len(c.Paths), "path"))
	for _, path := range c.Paths {
		fmt.Fprintf(&b, "  %s\n", path)
	}
	t := newTable()
	t.add("take "+source+"'s version:", fmt.Sprintf("rlpipe merge %s %s --strategy source-wins", source, dest))
	t.add("keep "+dest+"'s version:", fmt.Sprintf("rlpipe merge %s %s --strategy dest-wins", source, dest))
	_ = t.write(&b) // a strings.Builder does not fail
	b.WriteString("or change one side, commit, and merge again")
	return explain(err, "%s", b.String())
}

package cli

import (
	"context"
	"errors"
	"iter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
)

func newBranchCommand(g *rootOptions) *cobra.Command {
	return newGroupCommand("branch", "create, list, delete and reset branches",
		newBranchCreateCommand(g),
		newBranchListCommand(g),
		newBranchDeleteCommand(g),
		newBranchResetCommand(g),
	)
}

type branchCreateOptions struct {
	from string
}

func (o *branchCreateOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.from, "from", "", "ref to branch from (default: the store's default branch)")
}

func newBranchCreateCommand(g *rootOptions) *cobra.Command {
	return storeCommand(g, &cobra.Command{
		Use:     "create NAME [--from REF]",
		Short:   "create a branch at a ref (copies no data)",
		Example: "  rlpipe branch create try-reward --from main\n  rlpipe branch create replay --from v1.0~2",
		Args:    exactArgs("NAME"),
	}, func(ctx context.Context, st artifacts.Store, o branchCreateOptions, args []string, p printer) error {
		return branchCreateFunc(ctx, st, o, args[0], p)
	})
}

func branchCreateFunc(ctx context.Context, st artifacts.Store, o branchCreateOptions, name string, p printer) error {
	if err := artifacts.ValidateBranchName(name); err != nil {
		return asUsage(err)
	}
	from, err := orDefaultBranch(ctx, st, o.from)
	if err != nil {
		return err
	}
	if err := parseRef(from); err != nil {
		return err
	}
	b, err := st.CreateBranch(ctx, name, from)
	switch {
	case errors.Is(err, artifacts.ErrBranchExists):
		return explain(err, "branch %s already exists: pick another name, or delete it first with `rlpipe branch delete %s`", name, name)
	case err != nil:
		return withOp(err, "create branch %s from %s", name, from)
	}
	return p.Result(b, "created branch %s at %s (from %s)\n", b.Name, shortID(b.CommitID), from)
}

// orDefaultBranch returns ref, or the store's default branch when ref is
// empty.
func orDefaultBranch(ctx context.Context, st artifacts.Store, ref string) (string, error) {
	if ref != "" {
		return ref, nil
	}
	repo, err := st.Repository(ctx)
	if err != nil {
		return "", withOp(err, "describe store")
	}
	return repo.DefaultBranch, nil
}

// collect gathers what a store listing yields, never nil (JSON prints
// an empty listing as []); an error is returned with what was listed.
func collect[T any](seq iter.Seq2[T, error], format string, a ...any) ([]T, error) {
	all := []T{}
	for v, err := range seq {
		if err != nil {
			return nil, withOp(err, format, a...)
		}
		all = append(all, v)
	}
	return all, nil
}

func newBranchListCommand(g *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "list branches and their head commits",
		Args:    exactArgs(),
		RunE: g.onStore(func(ctx context.Context, st artifacts.Store, _ []string, p printer) error {
			return branchListFunc(ctx, st, p)
		}),
	}
}

func branchListFunc(ctx context.Context, st artifacts.Store, p printer) error {
	repo, err := st.Repository(ctx)
	if err != nil {
		return withOp(err, "describe store")
	}
	branches, err := collect(st.ListBranches(ctx), "list branches")
	if err != nil {
		return err
	}
	if p.json {
		return p.JSON(branches)
	}
	t := newTable("BRANCH", "COMMIT", "")
	for _, b := range branches {
		note := ""
		if b.Name == repo.DefaultBranch {
			note = "(default)"
		}
		t.add(b.Name, shortID(b.CommitID), note)
	}
	return t.write(p.w)
}

func newBranchDeleteCommand(g *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME",
		Aliases: []string{"rm"},
		Short:   "delete a branch and its uncommitted changes (commits stay reachable from other refs)",
		Example: "  rlpipe branch delete try-reward",
		Args:    exactArgs("NAME"),
		RunE: g.onStore(func(ctx context.Context, st artifacts.Store, args []string, p printer) error {
			return branchDeleteFunc(ctx, st, args[0], p)
		}),
	}
}

// deletedOut is the JSON shape of the delete commands.
type deletedOut struct {
	Deleted string `json:"deleted"`
}

func branchDeleteFunc(ctx context.Context, st artifacts.Store, name string, p printer) error {
	err := st.DeleteBranch(ctx, name)
	switch {
	case errors.Is(err, artifacts.ErrProtected):
		return explain(err, "branch %s is the store's default branch and cannot be deleted", name)
	case err != nil:
		return withOp(err, "delete branch %s", name)
	}
	return p.Result(deletedOut{Deleted: name}, "deleted branch %s\n", name)
}

type branchResetOptions struct {
	prefix string
}

func (o *branchResetOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.prefix, "prefix", "", "discard only changes under this path prefix")
}

func newBranchResetCommand(g *rootOptions) *cobra.Command {
	return storeCommand(g, &cobra.Command{
		Use:     "reset NAME [--prefix P]",
		Short:   "discard a branch's uncommitted changes",
		Example: "  rlpipe branch reset main\n  rlpipe branch reset try-reward --prefix iterations/000003/",
		Args:    exactArgs("NAME"),
	}, func(ctx context.Context, st artifacts.Store, o branchResetOptions, args []string, p printer) error {
		return branchResetFunc(ctx, st, o, args[0], p)
	})
}

// resetOut is the JSON shape of branch reset.
type resetOut struct {
	Branch    string             `json:"branch"`
	Prefix    string             `json:"prefix,omitempty"`
	Discarded []artifacts.Change `json:"discarded"`
}

func branchResetFunc(ctx context.Context, st artifacts.Store, o branchResetOptions, name string, p printer) error {
	// List what will be discarded first, so the user sees what went.
	changes, err := uncommitted(ctx, st, name, o.prefix)
	if err != nil {
		return err
	}
	if err := st.ResetBranch(ctx, name, o.prefix); err != nil {
		return withOp(err, "reset branch %s", name)
	}
	if p.json {
		return p.JSON(resetOut{Branch: name, Prefix: o.prefix, Discarded: changes})
	}
	where := ""
	if o.prefix != "" {
		where = " under " + o.prefix
	}
	return p.Printf("reset branch %s: discarded %s%s\n", name, plural(len(changes), "uncommitted change"), where)
}

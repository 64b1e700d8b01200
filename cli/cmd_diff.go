package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
)

type diffOptions struct {
	twoDot bool
	prefix string
}

func (o *diffOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.twoDot, "two-dot", false, "compare LEFT and RIGHT directly instead of what RIGHT changed since their merge base")
	fs.StringVar(&o.prefix, "prefix", "", "only paths under this prefix")
}

func newDiffCommand(g *rootOptions) *cobra.Command {
	var o diffOptions
	cmd := &cobra.Command{
		Use:   "diff LEFT RIGHT | diff BRANCH",
		Short: "list the paths that differ between two refs, or a branch's uncommitted changes",
		Long: `With two refs, list what RIGHT changed since it forked from LEFT (a three-dot
diff, as in lakeFS), or with --two-dot, every path that differs between them.
With one branch, list its uncommitted changes.`,
		Example: "  rlpipe diff main try-reward\n  rlpipe diff main~1 main --two-dot --prefix data/\n  rlpipe diff try-reward",
		Args:    rangeArgs(1, "LEFT", "RIGHT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
				return diffFunc(ctx, st, o, args, g.printer(cmd))
			})
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func diffFunc(ctx context.Context, st artifacts.Store, o diffOptions, refs []string, p printer) error {
	for _, r := range refs {
		if err := parseRef(r); err != nil {
			return err
		}
	}
	var (
		changes []artifacts.Change
		err     error
		none    string
	)
	if len(refs) == 1 {
		if o.twoDot {
			return usagef("--two-dot compares two refs: rlpipe diff LEFT RIGHT --two-dot")
		}
		changes, err = uncommitted(ctx, st, refs[0], o.prefix)
		none = "no uncommitted changes on " + refs[0]
	} else {
		changes, err = diffRefs(ctx, st, refs[0], refs[1], &artifacts.DiffOptions{TwoDot: o.twoDot, Prefix: o.prefix})
		none = fmt.Sprintf("no changes between %s and %s", refs[0], refs[1])
	}
	if err != nil {
		return err
	}
	if p.json {
		return p.JSON(changes)
	}
	if len(changes) == 0 {
		if o.prefix != "" {
			none += " under " + o.prefix
		}
		return p.Printf("%s\n", none)
	}
	return writeChanges(p, changes)
}

func writeChanges(p printer, changes []artifacts.Change) error {
	t := newTable()
	for _, c := range changes {
		t.add(changeSymbol(c.Type), string(c.Type), c.Path)
	}
	return t.write(p.w)
}

func changeSymbol(t artifacts.ChangeType) string {
	switch t {
	case artifacts.ChangeAdded:
		return "+"
	case artifacts.ChangeRemoved:
		return "-"
	}
	return "~"
}

func diffRefs(ctx context.Context, st artifacts.Store, left, right string, opts *artifacts.DiffOptions) ([]artifacts.Change, error) {
	changes := []artifacts.Change{}
	for c, err := range st.Diff(ctx, left, right, opts) {
		if err != nil {
			return nil, withOp(err, "diff %s %s", left, right)
		}
		changes = append(changes, c)
	}
	return changes, nil
}

// uncommitted lists a branch's staged changes under prefix ("" for all).
func uncommitted(ctx context.Context, st artifacts.Store, branch, prefix string) ([]artifacts.Change, error) {
	changes := []artifacts.Change{}
	for c, err := range st.DiffUncommitted(ctx, branch) {
		if err != nil {
			return nil, withOp(err, "list uncommitted changes on %s", branch)
		}
		if strings.HasPrefix(c.Path, prefix) {
			changes = append(changes, c)
		}
	}
	return changes, nil
}

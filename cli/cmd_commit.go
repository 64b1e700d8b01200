package cli

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
)

// commitFlags are the flags that shape a new commit; commit, merge and
// revert share them.
type commitFlags struct {
	meta       []string
	allowEmpty bool
	committer  string
	date       string
}

func (o *commitFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.meta, "meta", nil, "commit metadata KEY=VALUE (repeatable)")
	fs.BoolVar(&o.allowEmpty, "allow-empty", false, "record a commit even when nothing changed")
	fs.StringVar(&o.committer, "committer", "", "committer name (default: the store's user)")
	fs.StringVar(&o.date, "date", "", "commit date, RFC 3339 or Unix seconds, for reproducible histories (lakeFS sets its own)")
}

func (o *commitFlags) options() (*artifacts.CommitOptions, error) {
	meta, err := parseMeta(o.meta)
	if err != nil {
		return nil, err
	}
	date, err := parseDate(o.date)
	if err != nil {
		return nil, err
	}
	return &artifacts.CommitOptions{Metadata: meta, AllowEmpty: o.allowEmpty, Committer: o.committer, Date: date}, nil
}

type commitOptions struct {
	message string
	commitFlags
}

func (o *commitOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.message, "message", "m", "", "commit message (required)")
	o.commitFlags.AddFlags(fs)
}

func newCommitCommand(g *rootOptions) *cobra.Command {
	return storeCommand(g, &cobra.Command{
		Use:   "commit BRANCH -m MSG [--meta k=v]...",
		Short: "record a branch's uncommitted changes as a commit",
		Example: `  rlpipe commit main -m "add prompts"
  rlpipe commit runs-exp1 -m "iteration 3" --meta iteration=3`,
		Args: exactArgs("BRANCH"),
	}, func(ctx context.Context, st artifacts.Store, o commitOptions, args []string, p printer) error {
		return commitFunc(ctx, st, o, args[0], p)
	})
}

func commitFunc(ctx context.Context, st artifacts.Store, o commitOptions, branch string, p printer) error {
	if strings.TrimSpace(o.message) == "" {
		return usagef("commit %s: a commit needs a message: -m MSG", branch)
	}
	opts, err := o.options()
	if err != nil {
		return err
	}
	c, err := st.Commit(ctx, branch, o.message, opts)
	switch {
	case errors.Is(err, artifacts.ErrNoChanges):
		return explain(err, "nothing to commit on %s: stage changes with `rlpipe put` or `rlpipe import` first, or pass --allow-empty", branch)
	case errors.Is(err, artifacts.ErrReadOnlyRef):
		return explain(err, "%s is not a branch: commits go to a branch (`rlpipe branch list`)", branch)
	case err != nil:
		return withOp(err, "commit %s", branch)
	}
	return p.Result(c, "committed %s on %s: %s\n", shortID(c.ID), branch, firstLine(c.Message))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

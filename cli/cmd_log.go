package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
)

type logOptions struct {
	limit       int
	firstParent bool
	paths       []string
	prefixes    []string
	oneline     bool
}

func (o *logOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVarP(&o.limit, "limit", "n", 0, "show at most N commits (0: all)")
	fs.BoolVar(&o.firstParent, "first-parent", false, "follow only first parents (the branch's own line)")
	fs.StringArrayVar(&o.paths, "path", nil, "only commits that changed this exact path (repeatable)")
	fs.StringArrayVar(&o.prefixes, "prefix", nil, "only commits that changed something under this prefix (repeatable)")
	fs.BoolVar(&o.oneline, "oneline", false, "one line per commit: short id, date, message")
}

func newLogCommand(g *rootOptions) *cobra.Command {
	return storeCommand(g, &cobra.Command{
		Use:   "log [REF]",
		Short: "show the history of a ref, newest first",
		Long:  "Show the commits reachable from REF (default: the store's default branch), newest first.",
		Example: `  rlpipe log main
  rlpipe log runs-exp1 --limit 5 --first-parent
  rlpipe log main --path data/prompts.parquet -o json`,
		Args: rangeArgs(0, "REF"),
	}, func(ctx context.Context, st artifacts.Store, o logOptions, args []string, p printer) error {
		ref := ""
		if len(args) == 1 {
			ref = args[0]
		}
		return logFunc(ctx, st, o, ref, p)
	})
}

func logFunc(ctx context.Context, st artifacts.Store, o logOptions, ref string, p printer) error {
	if o.limit < 0 {
		return usagef("invalid --limit %d: use 0 (all) or more", o.limit)
	}
	ref, err := orDefaultBranch(ctx, st, ref)
	if err != nil {
		return err
	}
	if err := parseRef(ref); err != nil {
		return err
	}
	opts := &artifacts.LogOptions{Limit: o.limit, FirstParent: o.firstParent, Paths: o.paths, Prefixes: o.prefixes}
	commits := []artifacts.Commit{}
	for c, err := range st.Log(ctx, ref, opts) {
		if err != nil {
			return withOp(err, "log %s", ref)
		}
		commits = append(commits, c)
		if o.limit > 0 && len(commits) == o.limit {
			break
		}
	}
	switch {
	case p.json:
		return p.JSON(commits)
	case o.oneline:
		t := newTable()
		for _, c := range commits {
			t.add(shortID(c.ID), formatTime(c.CreationDate), firstLine(c.Message))
		}
		return t.write(p.w)
	}
	var b strings.Builder
	for i, c := range commits {
		if i > 0 {
			b.WriteByte('\n')
		}
		writeCommit(&b, c)
	}
	return p.Printf("%s", b.String())
}

// writeCommit formats a commit the way git log does: id, header lines
// aligned, then the message and metadata indented.
func writeCommit(b *strings.Builder, c artifacts.Commit) {
	fmt.Fprintf(b, "commit %s\n", c.ID)
	t := newTable()
	if len(c.Parents) > 1 {
		short := make([]string, len(c.Parents))
		for i, id := range c.Parents {
			short[i] = shortID(id)
		}
		t.add("Merge:", strings.Join(short, " "))
	}
	t.add("Committer:", c.Committer)
	t.add("Date:", formatTime(c.CreationDate))
	_ = t.write(b)
	b.WriteByte('\n')
	for _, line := range strings.Split(strings.TrimRight(c.Message, "\n"), "\n") {
		if line == "" {
			b.WriteByte('\n')
			continue
		}
		fmt.Fprintf(b, "    %s\n", line)
	}
	if len(c.Metadata) > 0 {
		b.WriteByte('\n')
		for _, k := range slices.Sorted(maps.Keys(c.Metadata)) {
			fmt.Fprintf(b, "    %s: %s\n", k, c.Metadata[k])
		}
	}
}

package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
)

type diffOptions struct {
	twoDot   bool
	prefix   string
	metadata bool
}

func (o *diffOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.twoDot, "two-dot", false, "compare LEFT and RIGHT directly instead of what RIGHT changed since their merge base")
	fs.StringVar(&o.prefix, "prefix", "", "only paths under this prefix")
	fs.BoolVar(&o.metadata, "metadata", false, "also list the paths whose content is the same and only their metadata differs (type metadata)")
}

func newDiffCommand(g *rootOptions) *cobra.Command {
	return storeCommand(g, &cobra.Command{
		Use:   "diff LEFT RIGHT | diff BRANCH",
		Short: "list the paths that differ between two refs, or a branch's uncommitted changes",
		Long: `With two refs, list what RIGHT changed since it forked from LEFT (a three-dot
diff, as in lakeFS), or with --two-dot, every path that differs between them.
With one branch, list its uncommitted changes.
A path counts as changed when its content differs (its checksum): one whose
bytes are the same and only its metadata differs (an artifact written again
by a rerun, with a new creation time) is left out and counted on the last
line; --metadata lists those too, as type metadata.`,
		Example: "  rlpipe diff main try-reward\n  rlpipe diff main~1 main --two-dot --prefix data/\n  rlpipe diff runs-arith runs-again --two-dot --prefix iterations/ --metadata\n  rlpipe diff try-reward",
		Args:    rangeArgs(1, "LEFT", "RIGHT"),
	}, func(ctx context.Context, st artifacts.Store, o diffOptions, args []string, p printer) error {
		return diffFunc(ctx, st, o, args, p)
	})
}

func diffFunc(ctx context.Context, st artifacts.Store, o diffOptions, refs []string, p printer) error {
	for _, r := range refs {
		if err := parseRef(r); err != nil {
			return err
		}
	}
	var (
		changes       []artifacts.Change
		err           error
		none          string
		before, after string
	)
	if len(refs) == 1 {
		if o.twoDot {
			return usagef("--two-dot compares two refs: rlpipe diff LEFT RIGHT --two-dot")
		}
		changes, err = uncommitted(ctx, st, refs[0], o.prefix)
		none = "no uncommitted changes on " + refs[0]
		before, after = refs[0]+"@", refs[0]
	} else {
		changes, err = diffRefs(ctx, st, refs[0], refs[1], &artifacts.DiffOptions{TwoDot: o.twoDot, Prefix: o.prefix})
		none = fmt.Sprintf("no changes between %s and %s", refs[0], refs[1])
		before, after = refs[0], refs[1]
	}
	if err != nil {
		return err
	}
	if !o.twoDot && len(refs) == 2 && hasModified(changes) {
		// A three-dot diff is what RIGHT changed since the merge base.
		m, ok := st.(artifacts.Merger)
		if !ok {
			return fmt.Errorf("diff: this store cannot find the merge base of %s and %s; use --two-dot", refs[0], refs[1])
		}
		base, err := m.MergeBase(ctx, refs[0], refs[1])
		if err != nil {
			return withOp(err, "diff %s %s: merge base", refs[0], refs[1])
		}
		before = base.ID
	}
	changes, sameContent, err := byContent(ctx, st, before, after, o.prefix, changes)
	if err != nil {
		return withOp(err, "diff %s", strings.Join(refs, " "))
	}
	if o.metadata {
		changes = append(changes, sameContent...)
		slices.SortStableFunc(changes, func(a, b artifacts.Change) int { return strings.Compare(a.Path, b.Path) })
	}
	if p.json {
		return p.JSON(changes)
	}
	if o.prefix != "" {
		none += " under " + o.prefix
	}
	if len(changes) == 0 && len(sameContent) == 0 {
		return p.Printf("%s\n", none)
	}
	if err := writeChanges(p, changes); err != nil {
		return err
	}
	if len(changes) == 0 {
		if err := p.Printf("%s in content\n", none); err != nil {
			return err
		}
	}
	if len(sameContent) > 0 && !o.metadata {
		return p.Printf("%d paths have the same content and differ only in metadata (--metadata lists them)\n", len(sameContent))
	}
	return nil
}

// ChangeMetadata is the type `diff --metadata` gives a path whose content
// is the same on both sides and whose metadata differs.
const ChangeMetadata artifacts.ChangeType = "metadata"

func hasModified(changes []artifacts.Change) bool {
	return slices.ContainsFunc(changes, func(c artifacts.Change) bool { return c.Type == artifacts.ChangeModified })
}

// byContent splits the modified paths of changes by content: those whose
// checksum at before and at after is the same stay out of the first list
// and are returned, with type ChangeMetadata, in the second. A backend's
// diff counts a metadata change as a change (lakeFS does); a user
// comparing two runs asks whether the bytes differ. The checksums come
// from one listing of each side under prefix, not a call per path.
func byContent(ctx context.Context, st artifacts.Store, before, after, prefix string, changes []artifacts.Change) (content, same []artifacts.Change, err error) {
	if !hasModified(changes) {
		return changes, nil, nil
	}
	sums := func(ref string) (map[string]string, error) {
		m := map[string]string{}
		for e, err := range st.ListObjects(ctx, ref, &artifacts.ListOptions{Prefix: prefix}) {
			if err != nil {
				return nil, err
			}
			m[e.Path] = e.Checksum
		}
		return m, nil
	}
	b, err := sums(before)
	if err != nil {
		return nil, nil, err
	}
	a, err := sums(after)
	if err != nil {
		return nil, nil, err
	}
	content = []artifacts.Change{}
	for _, c := range changes {
		if c.Type == artifacts.ChangeModified && b[c.Path] != "" && b[c.Path] == a[c.Path] {
			c.Type = ChangeMetadata
			same = append(same, c)
			continue
		}
		content = append(content, c)
	}
	return content, same, nil
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
	case ChangeMetadata:
		return "="
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

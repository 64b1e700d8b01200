package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
)

type lsOptions struct {
	recursive bool
}

func (o *lsOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVarP(&o.recursive, "recursive", "r", false, "list every object under the prefix instead of one level")
}

func newLsCommand(g *rootOptions) *cobra.Command {
	return storeCommand(g, &cobra.Command{
		Use:   "ls REF:PREFIX [--recursive]",
		Short: "list the objects and folders a ref holds under a prefix",
		Long: `List what REF holds under PREFIX, one level at a time (folders end in '/'),
or every object below it with --recursive. A branch shows its uncommitted
changes too; REF@ shows only its last commit.`,
		Example: "  rlpipe ls main:\n  rlpipe ls main:data/\n  rlpipe ls runs-exp1:iterations/ -r -o json",
		Args:    exactArgs("REF:PREFIX"),
	}, func(ctx context.Context, st artifacts.Store, o lsOptions, args []string, p printer) error {
		return lsFunc(ctx, st, o, args[0], p)
	})
}

// lsEntry is the JSON shape of one row of ls: an object, or a folder
// ("prefix") standing for everything below it.
type lsEntry struct {
	Path        string            `json:"path"`
	Type        string            `json:"type"` // "object" or "prefix"
	Size        *int64            `json:"size_bytes,omitempty"`
	Checksum    string            `json:"checksum,omitempty"`
	Mtime       *time.Time        `json:"mtime,omitempty"`
	ContentType string            `json:"content_type,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

func newLsEntry(e artifacts.Entry) lsEntry {
	if e.CommonPrefix {
		return lsEntry{Path: e.Path, Type: "prefix"}
	}
	size, mtime := e.Size, e.Mtime.UTC()
	out := lsEntry{Path: e.Path, Type: "object", Size: &size, Checksum: e.Checksum, ContentType: e.ContentType, Metadata: e.Metadata}
	if !e.Mtime.IsZero() {
		out.Mtime = &mtime
	}
	return out
}

func lsFunc(ctx context.Context, st artifacts.Store, o lsOptions, arg string, p printer) error {
	a, err := parseArtifact(arg)
	if err != nil {
		return err
	}
	entries, err := listEntries(ctx, st, a.ref, a.path, o.recursive)
	if err != nil {
		return err
	}
	// "ls main:data" means the folder data/, as in a shell.
	if !o.recursive && a.path != "" && !strings.HasSuffix(a.path, "/") &&
		len(entries) == 1 && entries[0].CommonPrefix && entries[0].Path == a.path+"/" {
		if entries, err = listEntries(ctx, st, a.ref, a.path+"/", false); err != nil {
			return err
		}
	}
	if p.json {
		out := make([]lsEntry, len(entries))
		for i, e := range entries {
			out[i] = newLsEntry(e)
		}
		return p.JSON(out)
	}
	t := newTable("SIZE", "MODIFIED", "PATH").alignRight(0)
	for _, e := range entries {
		if e.CommonPrefix {
			t.add("", "", e.Path)
			continue
		}
		t.add(humanBytes(e.Size), formatTime(e.Mtime), e.Path)
	}
	return t.write(p.w)
}

// listEntries lists a ref under prefix: one level (delimiter "/") or all.
func listEntries(ctx context.Context, st artifacts.Store, ref, prefix string, recursive bool) ([]artifacts.Entry, error) {
	opts := &artifacts.ListOptions{Prefix: prefix}
	if !recursive {
		opts.Delimiter = "/"
	}
	var entries []artifacts.Entry
	for e, err := range st.ListObjects(ctx, ref, opts) {
		if err != nil {
			return nil, withOp(err, "list %s:%s", ref, prefix)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

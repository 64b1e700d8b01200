package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
)

type fsckOptions struct {
	quick bool
}

func (o *fsckOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.quick, "quick", false, "check that each object's bytes are present with their recorded size instead of reading them (on lakeFS: read each object's last byte)")
}

func newFsckCommand(g *rootOptions) *cobra.Command {
	return storeCommand(g, &cobra.Command{
		Use:   "fsck [--quick]",
		Short: "check that every commit, tree and object a ref reaches is stored intact",
		Long: `Check the store: every commit, tree (metarange and range) and object
that a branch, a tag or an uncommitted change reaches must be present and
match the digest it is named by. Each damaged thing is listed with a branch
or tag that reaches it, the commit that names it and, for an object, its
path; the command then exits 1. It reads every object once (--quick only
checks their sizes). gc runs the same check first and refuses a damaged
store.

On lakeFS the check goes through its API: every commit is read, and every
object read back whole and compared with the SHA-256 rlpipe recorded when
it wrote it. What the API cannot show is printed as "not checked:" lines:
lakeFS's trees, and the bytes of objects that carry no recorded SHA-256.`,
		Example: "  rlpipe fsck\n  rlpipe fsck --quick -o json",
		Args:    exactArgs(),
	}, func(ctx context.Context, st artifacts.Store, o fsckOptions, _ []string, p printer) error {
		return fsckFunc(ctx, st, g.store, o, p)
	})
}

// fsckOut is the JSON shape of fsck.
type fsckOut struct {
	OK bool `json:"ok"`
	artifacts.VerifyResult
}

func fsckFunc(ctx context.Context, st artifacts.Store, uri string, o fsckOptions, p printer) error {
	v, ok := st.(artifacts.Verifier)
	if !ok {
		return failure(explain(artifacts.ErrNotSupported, "the store at %s cannot be checked from rlpipe: its backend has no check (check its storage with the backend's own tools)", uri))
	}
	res, err := v.Verify(ctx, &artifacts.VerifyOptions{Quick: o.quick})
	if err != nil {
		return withOp(err, "fsck %s", uri)
	}
	if p.json {
		if res.Damage == nil {
			res.Damage = []artifacts.Damage{}
		}
		if err := p.JSON(fsckOut{OK: len(res.Damage) == 0, VerifyResult: res}); err != nil {
			return err
		}
	} else {
		for _, d := range res.Damage {
			if err := p.Printf("damaged: %s\n", d); err != nil {
				return err
			}
		}
		for _, l := range res.Limits {
			if err := p.Printf("not checked: %s\n", l); err != nil {
				return err
			}
		}
		what := fmt.Sprintf("checked %s, %s and %s", plural(res.Commits, "commit"), plural(res.Trees, "tree"), plural(res.Objects, "object"))
		if res.Trees == 0 && len(res.Limits) > 0 {
			what = fmt.Sprintf("checked %s and %s", plural(res.Commits, "commit"), plural(res.Objects, "object"))
		}
		if !o.quick {
			what += " (" + humanBytes(res.Bytes) + ")"
		}
		verdict := "ok"
		if len(res.Damage) > 0 {
			verdict = plural(len(res.Damage), "damaged thing")
		}
		if err := p.Printf("%s: %s\n", what, verdict); err != nil {
			return err
		}
	}
	if len(res.Damage) == 0 {
		return nil
	}
	next := "restore the store from a copy, or delete the refs that reach the damage"
	if strings.HasPrefix(uri, "lakefs://") {
		next = "write each damaged object again from a sound copy (`rlpipe put FILE BRANCH:PATH`, then commit), revert the commits that wrote them, " +
			"or delete the refs that reach them; a lakeFS that cannot serve an object is repaired with lakeFS's own tools"
	}
	return failure(explain(artifacts.ErrIntegrity, "fsck %s: %s, the first: %s (%s)",
		uri, plural(len(res.Damage), "damaged thing"), res.Damage[0], next))
}

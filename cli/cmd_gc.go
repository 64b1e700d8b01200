package cli

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
)

type gcOptions struct {
	dryRun bool
	grace  time.Duration
}

func (o *gcOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.dryRun, "dry-run", false, "report what would be removed without removing it")
	fs.DurationVar(&o.grace, "grace", time.Hour, "keep unreferenced data younger than this (0: keep none)")
}

func newGCCommand(g *rootOptions) *cobra.Command {
	return storeCommand(g, &cobra.Command{
		Use:   "gc [--dry-run] [--grace DURATION]",
		Short: "remove data no branch, tag or uncommitted change can reach (embedded store)",
		Long: `Remove commits and stored bytes that no branch, tag or uncommitted change
can reach. Only the embedded store collects garbage from here; a lakeFS
server runs its own garbage collection.

It first checks the store as fsck does (reading every object once) and
refuses to collect a damaged store, naming the damage.`,
		Example: "  rlpipe gc --dry-run\n  rlpipe gc --grace 10m",
		Args:    exactArgs(),
	}, func(ctx context.Context, st artifacts.Store, o gcOptions, _ []string, p printer) error {
		return gcFunc(ctx, st, g.store, o, p)
	})
}

// gcOut is the JSON shape of gc.
type gcOut struct {
	DryRun bool `json:"dry_run"`
	artifacts.GCResult
}

func gcFunc(ctx context.Context, st artifacts.Store, uri string, o gcOptions, p printer) error {
	if o.grace < 0 {
		return usagef("invalid --grace %s: use 0 or more", o.grace)
	}
	notSupported := func(err error) error {
		return failure(explain(err, "the store at %s does not collect garbage from rlpipe: lakeFS runs its own garbage collection (set up its GC rules on the server)", uri))
	}
	c, ok := st.(artifacts.Collector)
	if !ok {
		return notSupported(artifacts.ErrNotSupported)
	}
	// Collecting on a damaged store could delete what the damage hides
	// from the mark, and would hide the damage: check it first, as fsck.
	if v, ok := st.(artifacts.Verifier); ok {
		check, err := v.Verify(ctx, nil)
		if err != nil {
			return withOp(err, "gc %s", uri)
		}
		if len(check.Damage) > 0 {
			return failure(&artifacts.DamagedError{Op: "gc " + uri, Damage: check.Damage})
		}
	}
	grace := o.grace
	if grace == 0 {
		grace = -1 // GCOptions: zero means the default, negative means none.
	}
	res, err := c.GC(ctx, &artifacts.GCOptions{GracePeriod: grace, DryRun: o.dryRun})
	switch {
	case errors.Is(err, artifacts.ErrNotSupported):
		return notSupported(err)
	case err != nil:
		return withOp(err, "gc %s", uri)
	}
	if p.json {
		return p.JSON(gcOut{DryRun: o.dryRun, GCResult: res})
	}
	verb := "removed"
	if o.dryRun {
		verb = "would remove"
	}
	return p.Printf("%s %s (%s) and %s; kept %s\n", verb,
		plural(res.BlobsRemoved, "blob"), humanBytes(res.BytesRemoved),
		plural(res.CommitsRemoved, "commit"), plural(res.BlobsKept, "blob"))
}

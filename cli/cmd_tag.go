package cli

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/rlpipe/rlpipe/artifacts"
)

func newTagCommand(g *rootOptions) *cobra.Command {
	return newGroupCommand("tag", "create, list and delete tags (immutable names for commits)",
		newTagCreateCommand(g),
		newTagListCommand(g),
		newTagDeleteCommand(g),
	)
}

func newTagCreateCommand(g *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "create NAME REF",
		Short:   "point a new tag at the commit REF names",
		Example: "  rlpipe tag create v1.0 main\n  rlpipe tag create before-rescore runs-exp1~1",
		Args:    exactArgs("NAME", "REF"),
		RunE: g.onStore(func(ctx context.Context, st artifacts.Store, args []string, p printer) error {
			return tagCreateFunc(ctx, st, args[0], args[1], p)
		}),
	}
}

func tagCreateFunc(ctx context.Context, st artifacts.Store, name, ref string, p printer) error {
	if err := artifacts.ValidateTagName(name); err != nil {
		return asUsage(err)
	}
	if err := parseRef(ref); err != nil {
		return err
	}
	t, err := st.CreateTag(ctx, name, ref)
	switch {
	case errors.Is(err, artifacts.ErrTagExists):
		return explain(err, "tag %s already exists: tags never move; pick another name, or `rlpipe tag delete %s` first", name, name)
	case err != nil:
		return withOp(err, "create tag %s at %s", name, ref)
	}
	return p.Result(t, "created tag %s at %s\n", t.Name, shortID(t.CommitID))
}

func newTagListCommand(g *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "list tags and their commits",
		Args:    exactArgs(),
		RunE: g.onStore(func(ctx context.Context, st artifacts.Store, _ []string, p printer) error {
			return tagListFunc(ctx, st, p)
		}),
	}
}

func tagListFunc(ctx context.Context, st artifacts.Store, p printer) error {
	tags, err := collect(st.ListTags(ctx), "list tags")
	if err != nil {
		return err
	}
	if p.json {
		return p.JSON(tags)
	}
	t := newTable("TAG", "COMMIT")
	for _, tag := range tags {
		t.add(tag.Name, shortID(tag.CommitID))
	}
	return t.write(p.w)
}

func newTagDeleteCommand(g *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME",
		Aliases: []string{"rm"},
		Short:   "delete a tag (the commit stays)",
		Example: "  rlpipe tag delete v1.0",
		Args:    exactArgs("NAME"),
		RunE: g.onStore(func(ctx context.Context, st artifacts.Store, args []string, p printer) error {
			return tagDeleteFunc(ctx, st, args[0], p)
		}),
	}
}

func tagDeleteFunc(ctx context.Context, st artifacts.Store, name string, p printer) error {
	if err := st.DeleteTag(ctx, name); err != nil {
		return withOp(err, "delete tag %s", name)
	}
	return p.Result(deletedOut{Deleted: name}, "deleted tag %s\n", name)
}

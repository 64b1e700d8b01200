package cli

import (
	"context"
	"errors"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
)

type initStoreOptions struct {
	defaultBranch    string
	storageNamespace string
}

func (o *initStoreOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.defaultBranch, "default-branch", "main", "name of the first branch")
	fs.StringVar(&o.storageNamespace, "storage-namespace", "", "where a lakeFS server keeps the data (e.g. s3://bucket/prefix); the embedded store ignores it")
}

func newInitStoreCommand(g *rootOptions) *cobra.Command {
	return newCreateStoreCommand(g, "init-store", "create the store --store names")
}

func newRepoCommand(g *rootOptions) *cobra.Command {
	return newGroupCommand("repo", "work with the store's repository",
		newCreateStoreCommand(g, "create", "create the store --store names (same as init-store)"),
		newRepoShowCommand(g),
	)
}

func newCreateStoreCommand(g *rootOptions, use, short string) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:     use,
		Short:   short,
		Example: "  rlpipe init-store\n  rlpipe --store lakefs://my-repo init-store --storage-namespace s3://bucket/rlpipe",
		Args:    exactArgs(),
	}, func(cmd *cobra.Command, o initStoreOptions, _ []string) error {
		return initStoreFunc(cmd.Context(), g, o, g.printer(cmd))
	})
}

// initStoreOut is the JSON shape of init-store and repo show.
type initStoreOut struct {
	Store string `json:"store"`
	artifacts.Repository
}

func initStoreFunc(ctx context.Context, g *rootOptions, o initStoreOptions, p printer) error {
	if err := artifacts.ValidateBranchName(o.defaultBranch); err != nil {
		return asUsage(err)
	}
	if err := g.checkScheme(); err != nil {
		return err
	}
	st, err := artifacts.Create(ctx, g.store, &artifacts.Options{
		DefaultBranch:    o.defaultBranch,
		StorageNamespace: o.storageNamespace,
		Logger:           g.logger,
	})
	if errors.Is(err, artifacts.ErrRepositoryExists) {
		return explain(err, "a store already exists at %s: use it, or pick another with --store", g.store)
	}
	if err != nil {
		return failure(withOp(err, "create store %s", g.store))
	}
	defer st.Close()
	repo, err := st.Repository(ctx)
	if err != nil {
		return withOp(err, "describe store %s", g.store)
	}
	return p.Result(initStoreOut{Store: g.store, Repository: repo}, "created store %s with branch %s\n", g.store, repo.DefaultBranch)
}

func newRepoShowCommand(g *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "describe the store: name, default branch, storage namespace",
		Args:  exactArgs(),
		RunE: g.onStore(func(ctx context.Context, st artifacts.Store, _ []string, p printer) error {
			return repoShowFunc(ctx, g.store, st, p)
		}),
	}
}

func repoShowFunc(ctx context.Context, uri string, st artifacts.Store, p printer) error {
	repo, err := st.Repository(ctx)
	if err != nil {
		return withOp(err, "describe store %s", uri)
	}
	if p.json {
		return p.JSON(initStoreOut{Store: uri, Repository: repo})
	}
	t := newTable()
	t.add("store:", uri)
	t.add("name:", repo.Name)
	t.add("default branch:", repo.DefaultBranch)
	if repo.StorageNamespace != "" {
		t.add("storage namespace:", repo.StorageNamespace)
	}
	t.add("created:", formatTime(repo.CreatedAt))
	return t.write(p.w)
}

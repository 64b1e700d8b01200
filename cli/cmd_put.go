package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
)

type putOptions struct {
	contentType string
	meta        []string
	ifAbsent    bool
}

func (o *putOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.contentType, "content-type", "", "content type to record (default: from the file extension)")
	fs.StringArrayVar(&o.meta, "meta", nil, "object metadata KEY=VALUE (repeatable)")
	fs.BoolVar(&o.ifAbsent, "if-absent", false, "fail instead of replacing an object already at the path")
}

func newPutCommand(g *rootOptions) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:   "put FILE BRANCH:PATH",
		Short: "upload a local file as is (uncommitted until `rlpipe commit`)",
		Long: `Upload FILE byte for byte to PATH on a branch. FILE "-" reads standard input.
A PATH that is empty or ends in '/' takes the file's name. The object stays
uncommitted until ` + "`rlpipe commit BRANCH -m MSG`" + `. To turn a JSONL or CSV
dataset into a Parquet table, use ` + "`rlpipe import`" + `.`,
		Example: "  rlpipe put reward.yaml main:config/reward.yaml\n  echo hello | rlpipe put - try-reward:notes/hello.txt",
		Args:    exactArgs("FILE", "BRANCH:PATH"),
	}, func(cmd *cobra.Command, o putOptions, args []string) error {
		return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
			return putFunc(ctx, st, o, args[0], args[1], cmd.InOrStdin(), g.printer(cmd))
		})
	})
}

// objectOut is the JSON shape of put and import: where the object went
// and what was stored.
type objectOut struct {
	Ref string `json:"ref"`
	artifacts.ObjectInfo
}

func putFunc(ctx context.Context, st artifacts.Store, o putOptions, file, dest string, stdin io.Reader, p printer) error {
	a, err := destination(file, dest)
	if err != nil {
		return err
	}
	meta, err := parseMeta(o.meta)
	if err != nil {
		return err
	}
	var r io.Reader = stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return withOp(err, "put %s", file)
		}
		defer f.Close()
		r = f
	}
	ct := o.contentType
	if ct == "" {
		ct = contentTypeFor(a.path)
	}
	info, err := putObject(ctx, st, a, r, &artifacts.PutOptions{ContentType: ct, Metadata: meta, IfAbsent: o.ifAbsent})
	if err != nil {
		return err
	}
	return printPut(p, "put", a.ref, info)
}

// destination parses the BRANCH:PATH an upload goes to; an empty PATH or
// one ending in '/' takes the local file's name.
func destination(file, dest string) (artifactArg, error) {
	a, err := parseArtifact(dest)
	if err != nil {
		return a, err
	}
	if a.path == "" || strings.HasSuffix(a.path, "/") {
		if file == "-" {
			return a, usagef("%q: name the object when reading standard input, e.g. %s:data/file", dest, a.ref)
		}
		a.path = path.Join(a.path, filepath.Base(file))
	}
	if err := artifacts.ValidatePath(a.path); err != nil {
		return a, asUsage(err)
	}
	return a, nil
}

// putObject stages r at a, explaining the usual mistakes.
func putObject(ctx context.Context, st artifacts.Store, a artifactArg, r io.Reader, opts *artifacts.PutOptions) (artifacts.ObjectInfo, error) {
	info, err := st.PutObject(ctx, a.ref, a.path, r, opts)
	switch {
	case errors.Is(err, artifacts.ErrReadOnlyRef):
		return info, explain(err, "%s is not a branch: uploads go to a branch; make one with `rlpipe branch create NAME --from %s`", a.ref, a.ref)
	case errors.Is(err, artifacts.ErrObjectExists):
		return info, explain(err, "%s already holds an object: drop --if-absent to replace it", a)
	case err != nil:
		return info, withOp(err, "put %s", a)
	}
	return info, nil
}

func printPut(p printer, verb, ref string, info artifacts.ObjectInfo) error {
	return p.Result(objectOut{Ref: ref, ObjectInfo: info}, "%s %s:%s (%s), uncommitted: `rlpipe commit %s -m MSG` records it\n",
		verb, ref, info.Path, humanBytes(info.Size), ref)
}

// contentTypeFor guesses a content type from a path's extension, from a
// fixed table so that it does not depend on the machine.
func contentTypeFor(p string) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".parquet":
		return "application/vnd.apache.parquet"
	case ".json":
		return "application/json"
	case ".jsonl", ".ndjson":
		return "application/x-ndjson"
	case ".csv":
		return "text/csv"
	case ".yaml", ".yml":
		return "application/yaml"
	case ".txt", ".md":
		return "text/plain"
	case ".safetensors":
		return "application/octet-stream"
	}
	return ""
}

func newRmCommand(g *rootOptions) *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:     "rm BRANCH:PATH [--recursive]",
		Short:   "remove an object from a branch (uncommitted until `rlpipe commit`)",
		Example: "  rlpipe rm try-reward:data/old.parquet\n  rlpipe rm try-reward:iterations/000003/ -r",
		Args:    exactArgs("BRANCH:PATH"),
		RunE: g.onStore(func(ctx context.Context, st artifacts.Store, args []string, p printer) error {
			return rmFunc(ctx, st, recursive, args[0], p)
		}),
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "remove every object under the prefix")
	return cmd
}

// rmOut is the JSON shape of rm.
type rmOut struct {
	Branch  string   `json:"branch"`
	Removed []string `json:"removed"`
}

func rmFunc(ctx context.Context, st artifacts.Store, recursive bool, arg string, p printer) error {
	a, err := parseArtifact(arg)
	if err != nil {
		return err
	}
	paths := []string{a.path}
	if recursive {
		entries, err := listEntries(ctx, st, a.ref, a.path, true)
		if err != nil {
			return err
		}
		paths = paths[:0]
		for _, e := range entries {
			paths = append(paths, e.Path)
		}
		if len(paths) == 0 {
			return fmt.Errorf("rm %s: %w: nothing under the prefix", a, artifacts.ErrObjectNotFound)
		}
	} else if err := artifacts.ValidatePath(a.path); err != nil {
		return asUsage(err)
	}
	for _, path := range paths {
		err := st.DeleteObject(ctx, a.ref, path)
		switch {
		case errors.Is(err, artifacts.ErrReadOnlyRef):
			return explain(err, "%s is not a branch: removals go to a branch", a.ref)
		case err != nil:
			return withOp(err, "rm %s:%s", a.ref, path)
		}
	}
	return p.Result(rmOut{Branch: a.ref, Removed: paths}, "removed %s from %s, uncommitted: `rlpipe commit %s -m MSG` records it\n",
		plural(len(paths), "object"), a.ref, a.ref)
}

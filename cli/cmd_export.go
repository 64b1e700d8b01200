package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
)

type exportOptions struct {
	format string
}

func (o *exportOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.format, "format", "", "convert a table: csv, jsonl or parquet (default: from FILE's extension; the bytes as stored for other files)")
}

func newExportCommand(g *rootOptions) *cobra.Command {
	return storeCommand(g, &cobra.Command{
		Use:   "export REF:PATH FILE | export REF:PREFIX DIR",
		Short: "copy an object to a local file, or everything under a prefix to a directory",
		Long: `Copy the object at PATH in REF to FILE ("-" for standard output). A table
is converted when FILE's extension or --format asks for another format:
Parquet to JSONL or CSV, JSONL or CSV to Parquet. When PATH names no object, it is
a prefix: every object under it is copied into DIR, keeping the paths below
the prefix; with --format csv or jsonl its Parquet tables are converted on the
way (x.parquet becomes x.jsonl), for readers without a Parquet library.`,
		Example: "  rlpipe export main:data/prompts.parquet prompts.jsonl --format jsonl\n  rlpipe export runs-exp1:iterations/000003/ ./it3\n  rlpipe export runs-exp1:iterations/ ./its --format jsonl",
		Args:    exactArgs("REF:PATH", "FILE"),
	}, func(ctx context.Context, st artifacts.Store, o exportOptions, args []string, p printer) error {
		return exportFunc(ctx, st, o, args[0], args[1], p.w, p)
	})
}

// exportOut is the JSON shape of export: the files written.
type exportOut struct {
	Ref   string         `json:"ref"`
	Files []exportedFile `json:"files"`
}

type exportedFile struct {
	Path string `json:"path"` // object path in the store
	File string `json:"file"` // local file written
	Size int64  `json:"size_bytes"`
}

func exportFunc(ctx context.Context, st artifacts.Store, o exportOptions, arg, dest string, stdout io.Writer, p printer) error {
	format, err := parseFormat(o.format, "export")
	if err != nil {
		return err
	}
	a, err := parseArtifact(arg)
	if err != nil {
		return err
	}
	// A path that names an object is a file export; anything else a prefix.
	if a.path != "" && !strings.HasSuffix(a.path, "/") {
		_, err := st.StatObject(ctx, a.ref, a.path)
		switch {
		case err == nil:
			// "export main:data/prompts.parquet prompts.csv" converts.
			if o.format == "" && dest != "-" && formatOf(a.path) != formatRaw {
				format = formatOf(dest)
			}
			f, err := exportObject(ctx, st, a, dest, format, stdout)
			if err != nil || dest == "-" {
				return err
			}
			return printExport(p, a.ref, []exportedFile{f})
		case !errors.Is(err, artifacts.ErrObjectNotFound):
			return withOp(err, "export %s", a)
		}
		a.path += "/"
	}
	if dest == "-" {
		return usagef("export %s: a prefix exports to a directory, not standard output", a)
	}
	if format == formatParquet {
		return usagef("export %s: --format parquet converts one JSONL or CSV object; a prefix converts its Parquet tables to csv or jsonl", a)
	}
	files, err := exportPrefix(ctx, st, a, dest, format)
	if err != nil {
		return err
	}
	return printExport(p, a.ref, files)
}

func printExport(p printer, ref string, files []exportedFile) error {
	if p.json {
		return p.JSON(exportOut{Ref: ref, Files: files})
	}
	t := newTable().alignRight(0)
	var total int64
	for _, f := range files {
		t.add(humanBytes(f.Size), ref+":"+f.Path, "->", f.File)
		total += f.Size
	}
	if err := t.write(p.w); err != nil {
		return err
	}
	if len(files) > 1 {
		return p.Printf("exported %s (%s)\n", plural(len(files), "file"), humanBytes(total))
	}
	return nil
}

// exportPrefix copies every object under a.path (a folder, ending in '/'
// or empty) into dir, keeping the paths below the prefix. With format csv
// or jsonl, each Parquet table is converted (x.parquet becomes x.jsonl)
// and other objects are copied as stored.
func exportPrefix(ctx context.Context, st artifacts.Store, a artifactArg, dir, format string) ([]exportedFile, error) {
	entries, err := listEntries(ctx, st, a.ref, a.path, true)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("export %s: %w: nothing under that prefix (`rlpipe ls %s:` lists the ref)", a, artifacts.ErrObjectNotFound, a.ref)
	}
	files := make([]exportedFile, 0, len(entries))
	for _, e := range entries {
		rel := strings.TrimPrefix(e.Path, a.path)
		// An object path with ".." or a leading '/' must not write outside dir.
		if !filepath.IsLocal(filepath.FromSlash(rel)) {
			return files, fmt.Errorf("export %s:%s: the path leaves the target directory; export it on its own", a.ref, e.Path)
		}
		file := filepath.Join(dir, filepath.FromSlash(rel))
		objFormat := formatRaw
		if format != formatRaw && formatOf(e.Path) == formatParquet {
			objFormat = format
			file = strings.TrimSuffix(file, filepath.Ext(file)) + "." + format
		}
		f, err := exportObject(ctx, st, artifactArg{ref: a.ref, path: e.Path}, file, objFormat, nil)
		if err != nil {
			return files, err
		}
		files = append(files, f)
	}
	return files, nil
}

// exportObject writes one object to file ("-": stdout), converting a table
// when format asks for it. A file appears complete or not at all.
func exportObject(ctx context.Context, st artifacts.Store, a artifactArg, file string, format string, stdout io.Writer) (exportedFile, error) {
	out := exportedFile{Path: a.path, File: file}
	write := func(w io.Writer) (int64, error) {
		if format == formatRaw {
			return copyObject(ctx, st, a, w, "read")
		}
		return convertTable(ctx, st, a, format, w)
	}
	if file == "-" {
		if format == formatRaw {
			// Standard output cannot be taken back: check it all first.
			write = func(w io.Writer) (int64, error) { return writeVerified(ctx, st, a, w, "read") }
		}
		n, err := write(stdout)
		out.Size = n
		return out, err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return out, withOp(err, "export %s", a)
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*.tmp")
	if err != nil {
		return out, withOp(err, "export %s", a)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	n, err := write(tmp)
	if err == nil {
		err = tmp.Chmod(0o644) // CreateTemp makes files only the owner can read
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		return out, withOp(err, "export %s to %s", a, file)
	}
	out.Size = n
	return out, nil
}

// copyObject streams an object's bytes to w; the store verifies them. An
// error names verb ("read", "cat") and the object.
func copyObject(ctx context.Context, st artifacts.Store, a artifactArg, w io.Writer, verb string) (int64, error) {
	rc, _, err := st.GetObject(ctx, a.ref, a.path)
	if err != nil {
		return 0, withOp(err, "%s %s", verb, a)
	}
	defer rc.Close()
	n, err := io.Copy(w, rc)
	if err != nil {
		return n, withOp(err, "%s %s", verb, a)
	}
	return n, nil
}

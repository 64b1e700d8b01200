package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

type importOptions struct {
	table   string
	format  string
	strings []string
	meta    []string
}

func (o *importOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.table, "table", "", "table the rows must conform to: "+tableNames()+" (default: infer the schema)")
	fs.StringVar(&o.format, "format", "", "format of FILE: jsonl, csv or parquet (default: from its extension; other files upload as is)")
	fs.StringArrayVar(&o.strings, "string", nil, "import COLUMN of an inferred schema as text, whatever its values look like (repeatable)")
	fs.StringArrayVar(&o.meta, "meta", nil, "object metadata KEY=VALUE (repeatable)")
}

func tableNames() string {
	var names []string
	for _, d := range tables.All() {
		names = append(names, d.Name())
	}
	return strings.Join(names, ", ")
}

func newImportCommand(g *rootOptions) *cobra.Command {
	return storeCommand(g, &cobra.Command{
		Use:   "import FILE BRANCH:PATH [--table NAME | --string COLUMN...] [--format jsonl|csv|parquet]",
		Short: "import a local dataset as a Parquet table (uncommitted until `rlpipe commit`)",
		Long: `Import a local file to PATH on a branch. A JSONL or CSV dataset becomes a
Parquet table: with --table its rows must conform to that table's schema,
without it the schema is inferred from the data: each column is a bool,
int64, float64 or string column, and values that disagree in type (a word
among numbers) fail the import naming the line and column, unless --string
names the column. A Parquet file is checked (readable, and
conforming to the table) and uploaded as is. Any other file is uploaded as is.
A PATH that is empty or ends in '/' takes the file's name, with .parquet for
a converted dataset.`,
		Example: `  rlpipe import prompts.jsonl main:data/prompts.parquet
  rlpipe import eval.csv main:data/eval.parquet --table prompts
  rlpipe import labels.jsonl main:data/labels.parquet --string label
  rlpipe import samples.parquet try-reward:iterations/000003/trajectories.parquet`,
		Args: exactArgs("FILE", "BRANCH:PATH"),
	}, func(ctx context.Context, st artifacts.Store, o importOptions, args []string, p printer) error {
		return importFunc(ctx, st, o, args[0], args[1], p)
	})
}

// importOut is the JSON shape of import.
type importOut struct {
	Ref string `json:"ref"`
	artifacts.ObjectInfo
	Format string `json:"format"`          // jsonl, csv, parquet or raw
	Table  string `json:"table,omitempty"` // the table the rows conform to
	Rows   *int64 `json:"rows,omitempty"`  // rows in the table
}

func importFunc(ctx context.Context, st artifacts.Store, o importOptions, file, dest string, p printer) error {
	format, err := parseFormat(o.format, "import")
	if err != nil {
		return err
	}
	if o.format == "" {
		format = formatOf(file)
	}
	meta, err := parseMeta(o.meta)
	if err != nil {
		return err
	}
	a, err := importDestination(file, dest, format)
	if err != nil {
		return err
	}
	table := o.table
	if table != "" {
		if format == formatRaw {
			return usagef("import %s: --table applies to jsonl, csv and parquet files; name the format with --format", file)
		}
		if _, ok := tables.Lookup(table); !ok {
			return usagef("import %s: unknown table %q (known: %s)", file, table, tableNames())
		}
	}
	if len(o.strings) > 0 {
		switch {
		case table != "":
			return usagef("import %s: --string applies to an inferred schema; table %s fixes its columns' types", file, table)
		case format != formatJSONL && format != formatCSV:
			return usagef("import %s: --string applies to jsonl and csv files", file)
		}
	}

	in, err := os.Open(file)
	if err != nil {
		return withOp(err, "import %s", file)
	}
	defer in.Close()

	out := importOut{Ref: a.ref, Format: format, Table: table}
	if format == formatRaw {
		out.Format = "raw"
	}
	body := io.Reader(in)
	switch format {
	case formatJSONL, formatCSV:
		// Convert into a temporary file first: a bad row then fails the
		// import before anything reaches the store.
		tmp, rows, err := convertToParquet(in, file, &tables.ImportOptions{Format: tables.Format(format), Table: table, StringColumns: o.strings})
		if err != nil {
			return err
		}
		defer func() { tmp.Close(); os.Remove(tmp.Name()) }()
		body, out.Rows = tmp, &rows
	case formatParquet:
		rows, err := checkParquet(ctx, in, file, table)
		if err != nil {
			return err
		}
		if _, err := in.Seek(0, io.SeekStart); err != nil {
			return withOp(err, "import %s", file)
		}
		out.Rows = &rows
	}
	ct := contentTypeFor(a.path)
	if format != formatRaw {
		ct = contentTypeFor(".parquet")
	}
	info, err := putObject(ctx, st, a, body, &artifacts.PutOptions{ContentType: ct, Metadata: meta})
	if err != nil {
		return err
	}
	out.ObjectInfo = info
	if p.json {
		return p.JSON(out)
	}
	what := "uploaded " + file
	if out.Rows != nil {
		what = fmt.Sprintf("imported %s (%s", file, plural(int(*out.Rows), "row"))
		if table != "" {
			what += ", table " + table
		}
		what += ")"
	}
	return p.Printf("%s to %s:%s (%s), uncommitted: `rlpipe commit %s -m MSG` records it\n",
		what, a.ref, info.Path, humanBytes(info.Size), a.ref)
}

// importDestination is destination() with a converted dataset's name
// ending in .parquet.
func importDestination(file, dest, format string) (artifactArg, error) {
	a, err := parseArtifact(dest)
	if err != nil {
		return a, err
	}
	if (a.path == "" || strings.HasSuffix(a.path, "/")) && (format == formatJSONL || format == formatCSV) {
		base := filepath.Base(file)
		base = strings.TrimSuffix(base, filepath.Ext(base)) + ".parquet"
		a.path = path.Join(a.path, base)
	}
	return destination(file, a.String())
}

// convertToParquet converts a JSONL or CSV file into a temporary Parquet
// file, returned open at its start, and counts the rows.
func convertToParquet(in io.Reader, name string, opts *tables.ImportOptions) (*os.File, int64, error) {
	tmp, err := os.CreateTemp("", "rlpipe-import-*.parquet")
	if err != nil {
		return nil, 0, withOp(err, "import %s", name)
	}
	// The file goes unless it is handed back, even if the conversion
	// panics: a failed import leaves nothing behind.
	kept := false
	defer func() {
		if !kept {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	rows, err := tables.Import(tmp, in, name, opts)
	if err != nil {
		// A bad row is a problem with the file, not with the command line.
		return nil, 0, failure(withOp(err, "import %s", name))
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, 0, withOp(err, "import %s", name)
	}
	kept = true
	return tmp, rows, nil
}

// checkParquet reads a whole Parquet file, conforming to table when one
// is named, and returns its row count.
func checkParquet(ctx context.Context, f *os.File, name, table string) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, withOp(err, "import %s", name)
	}
	pf, err := tables.OpenFile(f, fi.Size(), name, nil)
	if err != nil {
		return 0, failure(withOp(err, "import %s", name))
	}
	defer pf.Close()
	// Decode every row: a corrupt page or a value that does not fit the
	// table should fail here, not in a pipeline.
	if table != "" {
		err = conformsTo(ctx, f, fi.Size(), name, table)
	} else {
		for _, rerr := range pf.Records(ctx) {
			if rerr != nil {
				err = rerr
				break
			}
		}
	}
	if err != nil {
		return 0, failure(withOp(err, "import %s", name))
	}
	if pf.NumRows() == 0 {
		// As for JSONL and CSV: a table of nothing is almost always the
		// wrong file.
		return 0, failure(fmt.Errorf("import %s: %w: the Parquet file holds the columns %s and no row; export the rows again, or check that this is the file you meant",
			name, tables.ErrNoRows, strings.Join(columnNames(pf), ", ")))
	}
	return pf.NumRows(), nil
}

func columnNames(f *tables.File) []string {
	var out []string
	for _, fl := range f.Schema().Fields() {
		out = append(out, fl.Name)
	}
	return out
}

// conformsTo reads a Parquet file as rows of a known table.
func conformsTo(ctx context.Context, r io.ReaderAt, size int64, name, table string) error {
	if read, ok := tableReaders[table]; ok {
		return read(ctx, r, size, name)
	}
	return fmt.Errorf("%w: unknown table %q (known: %s)", artifacts.ErrInvalid, table, tableNames())
}

// tableReaders reads a Parquet file as rows of each known table, by name.
var tableReaders = map[string]func(ctx context.Context, r io.ReaderAt, size int64, name string) error{
	tables.PromptsName:      readsAs(tables.Prompts),
	tables.TrajectoriesName: readsAs(tables.Trajectories),
	tables.RewardsName:      readsAs(tables.Rewards),
	tables.AdvantagesName:   readsAs(tables.Advantages),
	tables.EvalSamplesName:  readsAs(tables.EvalSamples),
	tables.EvalSummaryName:  readsAs(tables.EvalSummary),
}

// readsAs reads every row of a Parquet file as a row of tb.
func readsAs[T any](tb *tables.Table[T]) func(ctx context.Context, r io.ReaderAt, size int64, name string) error {
	return func(ctx context.Context, r io.ReaderAt, size int64, name string) error {
		return readAll(tables.NewReader(r, size, name, tb, nil))(ctx)
	}
}

func readAll[T any](r *tables.Reader[T], err error) func(context.Context) error {
	return func(ctx context.Context) error {
		if err != nil {
			return err
		}
		defer r.Close()
		for _, err := range r.Rows(ctx) {
			if err != nil {
				return err
			}
		}
		return nil
	}
}

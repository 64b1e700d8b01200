package datasets

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// The layouts of a Hugging Face dataset directory that OpenHF reads.
const (
	// LayoutSaved is what datasets' save_to_disk writes: Arrow stream
	// files listed in state.json, beside dataset_info.json; a DatasetDict
	// adds dataset_dict.json and one such directory per split.
	LayoutSaved = "save_to_disk"
	// LayoutRepository is the Parquet layout of a dataset repository
	// snapshot: data/<split>-NNNNN-of-NNNNN.parquet (or <config>/<split>-…,
	// or <split>/NNNN.parquet).
	LayoutRepository = "repository"
)

// HFDataset is a split of a Hugging Face dataset on disk, found by OpenHF.
type HFDataset struct {
	Dir    string
	Layout string // LayoutSaved or LayoutRepository
	// Name is the dataset's name: HFOptions.Name, else the one its
	// dataset_info.json gives, else the repository's (a hub cache path
	// datasets--ORG--NAME/snapshots/REV), else the directory's base name.
	Name  string
	Split string
	// Revision says which version of the dataset this is:
	// HFOptions.Revision, else the commit of a hub cache snapshot
	// directory, else (save_to_disk) the fingerprint datasets recorded in
	// state.json, else "sha256:" and 16 hex digits of the files' digests.
	Revision string
	// Files are the data files read, in order, relative to Dir.
	Files []string
	// Digests holds each file's SHA-256 ("sha256:…"), by Files' names.
	Digests map[string]string
}

// Source is the rows' source: Name@Revision.
func (d *HFDataset) Source() string { return d.Name + "@" + d.Revision }

// HFOptions choose what OpenHF reads. A nil *HFOptions means the defaults.
type HFOptions struct {
	// Split is the split read ("" means SplitTrain).
	Split string
	// Name and Revision override what the directory says (see HFDataset).
	Name, Revision string
}

// OpenHF finds the split of the Hugging Face dataset saved in dir, in
// either layout (LayoutSaved, LayoutRepository), and digests its files.
// A directory in neither layout, or without the split, is an error that
// says what it holds.
func OpenHF(dir string, opts *HFOptions) (*HFDataset, error) {
	var o HFOptions
	if opts != nil {
		o = *opts
	}
	if o.Split == "" {
		o.Split = SplitTrain
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("open dataset %s: %w", dir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("open dataset %s: not a directory: %w", dir, ErrInvalid)
	}
	d := &HFDataset{Dir: dir, Split: o.Split, Name: o.Name, Revision: o.Revision, Digests: map[string]string{}}
	var err error
	switch {
	case exists(filepath.Join(dir, "dataset_dict.json")):
		err = d.openDict()
	case exists(filepath.Join(dir, "state.json")):
		err = d.openSaved("")
	default:
		err = d.openRepository()
	}
	if err != nil {
		return nil, err
	}
	for _, f := range d.Files {
		if d.Digests[f], err = fileDigest(filepath.Join(dir, f)); err != nil {
			return nil, err
		}
	}
	if d.Name == "" {
		d.Name = repoName(dir)
	}
	if d.Revision == "" {
		d.Revision = snapshotRevision(dir)
	}
	if d.Revision == "" {
		h := sha256.New()
		for _, f := range d.Files {
			fmt.Fprintf(h, "%s %s\n", f, d.Digests[f])
		}
		d.Revision = "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
	}
	return d, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// openDict reads a DatasetDict: dataset_dict.json lists the splits.
func (d *HFDataset) openDict() error {
	var dict struct {
		Splits []string `json:"splits"`
	}
	if err := readJSONFile(filepath.Join(d.Dir, "dataset_dict.json"), &dict); err != nil {
		return err
	}
	if !slices.Contains(dict.Splits, d.Split) {
		return fmt.Errorf("open dataset %s: no split %q (dataset_dict.json lists %s); pick one with --split: %w",
			d.Dir, d.Split, strings.Join(dict.Splits, ", "), ErrInvalid)
	}
	return d.openSaved(d.Split)
}

// openSaved reads a saved Dataset in the subdirectory sub of Dir.
func (d *HFDataset) openSaved(sub string) error {
	d.Layout = LayoutSaved
	var state struct {
		DataFiles []struct {
			Filename string `json:"filename"`
		} `json:"_data_files"`
		Fingerprint string  `json:"_fingerprint"`
		Split       *string `json:"_split"`
	}
	if err := readJSONFile(filepath.Join(d.Dir, sub, "state.json"), &state); err != nil {
		return err
	}
	if sub == "" && state.Split != nil && *state.Split != "" && *state.Split != d.Split {
		return fmt.Errorf("open dataset %s: it holds the split %q, not %q; pass --split %s: %w", d.Dir, *state.Split, d.Split, *state.Split, ErrInvalid)
	}
	if len(state.DataFiles) == 0 {
		return fmt.Errorf("open dataset %s: state.json lists no data files: %w", filepath.Join(d.Dir, sub), ErrInvalid)
	}
	for _, f := range state.DataFiles {
		if f.Filename == "" || filepath.IsAbs(f.Filename) || strings.Contains(f.Filename, "..") {
			return fmt.Errorf("open dataset %s: state.json names the data file %q: %w", filepath.Join(d.Dir, sub), f.Filename, ErrInvalid)
		}
		d.Files = append(d.Files, filepath.ToSlash(filepath.Join(sub, f.Filename)))
	}
	var info struct {
		DatasetName string `json:"dataset_name"`
		BuilderName string `json:"builder_name"`
	}
	if p := filepath.Join(d.Dir, sub, "dataset_info.json"); exists(p) {
		if err := readJSONFile(p, &info); err != nil {
			return err
		}
	}
	if d.Name == "" {
		d.Name = info.DatasetName
	}
	if d.Revision == "" && snapshotRevision(d.Dir) == "" && state.Fingerprint != "" {
		d.Revision = state.Fingerprint
	}
	return nil
}

// openRepository finds the split's Parquet files of a repository
// snapshot.
func (d *HFDataset) openRepository() error {
	d.Layout = LayoutRepository
	var all []string
	err := filepath.WalkDir(d.Dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(d.Dir, path)
		rel = filepath.ToSlash(rel)
		if e.IsDir() && rel != "." && (strings.HasPrefix(e.Name(), ".") || strings.Count(rel, "/") > 1) {
			return filepath.SkipDir
		}
		if !e.IsDir() && strings.HasSuffix(rel, ".parquet") {
			all = append(all, rel)
			if splitFile(rel, d.Split) {
				d.Files = append(d.Files, rel)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("open dataset %s: %w", d.Dir, err)
	}
	if len(d.Files) > 0 {
		slices.Sort(d.Files)
		return nil
	}
	if len(all) == 0 {
		return fmt.Errorf("open dataset %s: not a Hugging Face dataset: no dataset_dict.json or state.json (datasets' save_to_disk) and no data/<split>-*.parquet (a repository snapshot): %w", d.Dir, ErrInvalid)
	}
	slices.Sort(all)
	return fmt.Errorf("open dataset %s: no Parquet file of the split %q (want data/%s-*.parquet); the directory has %s; pick a split with --split: %w",
		d.Dir, d.Split, d.Split, strings.Join(all[:min(len(all), 8)], ", "), ErrInvalid)
}

// splitFile reports whether rel, a Parquet file of a repository snapshot,
// belongs to split: data/<split>-NNNNN-of-NNNNN.parquet, data/<split>.parquet,
// <config>/<split>-….parquet, or <config>/<split>/NNNN.parquet.
func splitFile(rel, split string) bool {
	parts := strings.Split(rel, "/")
	switch len(parts) {
	case 2:
		base := strings.TrimSuffix(parts[1], ".parquet")
		return base == split || strings.HasPrefix(base, split+"-") || parts[0] == split
	case 3:
		return parts[1] == split
	}
	return false
}

// repoName is ORG/NAME for a hub cache path
// …/datasets--ORG--NAME/snapshots/REV, else dir's base name.
func repoName(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	parts := strings.Split(filepath.ToSlash(abs), "/")
	for i := len(parts) - 3; i >= 0; i-- {
		if name, ok := strings.CutPrefix(parts[i], "datasets--"); ok && parts[i+1] == "snapshots" {
			return strings.ReplaceAll(name, "--", "/")
		}
	}
	return filepath.Base(abs)
}

var commitHash = regexp.MustCompile(`^[0-9a-f]{40}$`)

// snapshotRevision is REV for a hub cache path …/snapshots/REV, else "".
func snapshotRevision(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	base, parent := filepath.Base(abs), filepath.Base(filepath.Dir(abs))
	if parent == "snapshots" && commitHash.MatchString(base) {
		return base
	}
	return ""
}

func readJSONFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("open dataset: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("open dataset: %s: %v: %w", path, err, ErrInvalid)
	}
	return nil
}

// Load reads the split's rows as prompts, mapping columns with opts (see
// the package documentation). Source is the dataset's Source() and Split
// its split unless opts say otherwise; an error names the file, the row
// (counted from 0 in each file) and the column.
func (d *HFDataset) Load(opts *Options) ([]tables.Prompt, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Source == "" {
		o.Source = d.Source()
	}
	if o.Split == "" {
		o.Split = d.Split
	}
	if o.IDPrefix == "" {
		o.IDPrefix = d.Name + "-"
	}
	o, err := o.withDefaults(d.Dir)
	if err != nil {
		return nil, err
	}
	c := newConverter("", o)
	for _, f := range d.Files {
		c.name = filepath.Join(d.Dir, f)
		if err := d.loadFile(c, c.name); err != nil {
			return nil, err
		}
	}
	return c.rows, nil
}

func (d *HFDataset) loadFile(c *converter, path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("load %s: %w", path, err)
	}
	defer fh.Close()
	if d.Layout == LayoutRepository {
		fi, err := fh.Stat()
		if err != nil {
			return fmt.Errorf("load %s: %w", path, err)
		}
		f, err := tables.OpenFile(fh, fi.Size(), path, nil)
		if err != nil {
			return fmt.Errorf("load %s: %w", path, err)
		}
		defer f.Close()
		if err := c.o.Fields.check(path, f.Schema()); err != nil {
			return err
		}
		var row int64
		for m, err := range f.Rows(context.Background()) {
			if err != nil {
				return fmt.Errorf("load %s row %d: %w", path, row, err)
			}
			if err := c.add(m, pos{row: row}); err != nil {
				return err
			}
			row++
		}
		return nil
	}
	// save_to_disk writes the Arrow IPC stream format.
	r, err := ipc.NewReader(fh, ipc.WithAllocator(memory.NewGoAllocator()))
	if err != nil {
		return fmt.Errorf("load %s: not an Arrow stream file: %v: %w", path, err, ErrInvalid)
	}
	defer r.Release()
	if err := c.o.Fields.check(path, r.Schema()); err != nil {
		return err
	}
	var row int64
	for r.Next() {
		rec := r.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			m := make(map[string]any, rec.NumCols())
			for j, col := range rec.Columns() {
				m[rec.ColumnName(j)] = tables.Value(col, i)
			}
			if err := c.add(m, pos{row: row}); err != nil {
				return err
			}
			row++
		}
	}
	if err := r.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("load %s row %d: %v: %w", path, row, err, ErrInvalid)
	}
	return nil
}

// ImportHF reads the split of the Hugging Face dataset in dir (OpenHF,
// then Load) and puts it at branch:path (Put). The provenance records
// ImportTask, every data file's SHA-256 (under NAME/FILE) and the hash of
// the options; the rows' source is NAME@REVISION. It returns the commit,
// the number of rows and the dataset read. A split without a row is an
// error (tables.ErrNoRows) and nothing is put.
func ImportHF(ctx context.Context, st artifacts.Store, branch, path, dir string, hf *HFOptions, opts *ImportOptions) (artifacts.Commit, int, *HFDataset, error) {
	var o ImportOptions
	if opts != nil {
		o = *opts
	}
	d, err := OpenHF(dir, hf)
	if err != nil {
		return artifacts.Commit{}, 0, nil, err
	}
	rows, err := d.Load(&o.Load)
	if err != nil {
		return artifacts.Commit{}, 0, d, err
	}
	if len(rows) == 0 {
		return artifacts.Commit{}, 0, d, fmt.Errorf("import %s: %w: the split %q (%s) holds none; pick another with --split, or check that this is the dataset you meant: %w",
			dir, tables.ErrNoRows, d.Split, strings.Join(d.Files, ", "), ErrInvalid)
	}
	cfg, err := json.Marshal(struct {
		Load     Options
		Split    string
		Revision string
	}{o.Load, d.Split, d.Revision})
	if err != nil {
		return artifacts.Commit{}, 0, d, fmt.Errorf("import %s: encode the load options: %w", dir, err)
	}
	h := sha256.Sum256(cfg)
	p := &o.Put.Provenance
	if p.Task == "" {
		p.Task, p.TaskVersion = ImportTask, ImportVersion
	}
	p.Inputs = maps.Clone(p.Inputs)
	if p.Inputs == nil {
		p.Inputs = map[string]string{}
	}
	for f, sum := range d.Digests {
		p.Inputs[d.Name+"/"+f] = sum
	}
	if p.ConfigHash == "" {
		p.ConfigHash = "sha256:" + hex.EncodeToString(h[:])
	}
	if o.Put.Message == "" {
		o.Put.Message = fmt.Sprintf("datasets: import %s split %s (%d prompts, %s) to %s", d.Source(), d.Split, len(rows), d.Layout, path)
	}
	c, err := Put(ctx, st, branch, path, rows, &o.Put)
	return c, len(rows), d, err
}

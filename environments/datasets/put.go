package datasets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// ImportTask and ImportVersion name the task in the provenance of tables
// written by Import.
const (
	ImportTask    = "datasets.import"
	ImportVersion = "1"
)

// ContentType is the content type of the prompts tables Put writes.
const ContentType = "application/vnd.apache.parquet"

// PutOptions tune Put. A nil *PutOptions means the defaults.
type PutOptions struct {
	// Provenance is stored as the object's metadata; a zero CreatedAt
	// means now.
	Provenance artifacts.Provenance
	// Message is the commit message; "" means "datasets: N prompts at PATH".
	Message string
	// NoCommit stages the table without committing it.
	NoCommit bool
	// Commit tunes the commit (metadata, committer, date).
	Commit *artifacts.CommitOptions
}

// Put writes rows as a prompts table at branch:path with opts.Provenance
// as the object's metadata, and commits it (unless opts.NoCommit, when the
// returned commit is zero). Ids must be unique and non-empty. The table's
// bytes depend only on the rows.
func Put(ctx context.Context, st artifacts.Store, branch, path string, rows []tables.Prompt, opts *PutOptions) (artifacts.Commit, error) {
	var o PutOptions
	if opts != nil {
		o = *opts
	}
	seen := make(map[string]int, len(rows))
	for i, r := range rows {
		if r.PromptID == "" {
			return artifacts.Commit{}, fmt.Errorf("put dataset %s: row %d has no prompt id: %w", path, i, ErrInvalid)
		}
		if j, dup := seen[r.PromptID]; dup {
			return artifacts.Commit{}, fmt.Errorf("put dataset %s: rows %d and %d share the id %q: %w", path, j, i, r.PromptID, ErrInvalid)
		}
		seen[r.PromptID] = i
	}
	var buf bytes.Buffer
	if err := tables.Write(&buf, tables.Prompts, rows, nil); err != nil {
		return artifacts.Commit{}, fmt.Errorf("put dataset %s: %w", path, err)
	}
	prov := o.Provenance
	if prov.Task == "" {
		prov.Task = ImportTask
	}
	if prov.CreatedAt.IsZero() {
		prov.CreatedAt = time.Now().UTC()
	}
	meta, err := prov.Metadata(nil)
	if err != nil {
		return artifacts.Commit{}, fmt.Errorf("put dataset %s: %w", path, err)
	}
	if _, err := st.PutObject(ctx, branch, path, &buf, &artifacts.PutOptions{
		ContentType: ContentType, Metadata: meta}); err != nil {
		return artifacts.Commit{}, fmt.Errorf("put dataset %s on %s: %w", path, branch, err)
	}
	if o.NoCommit {
		return artifacts.Commit{}, nil
	}
	msg := o.Message
	if msg == "" {
		msg = fmt.Sprintf("datasets: %d prompts at %s", len(rows), path)
	}
	c, err := st.Commit(ctx, branch, msg, o.Commit)
	if err != nil {
		return artifacts.Commit{}, fmt.Errorf("commit dataset %s on %s: %w", path, branch, err)
	}
	return c, nil
}

// ImportOptions tune Import. A nil *ImportOptions means the defaults.
type ImportOptions struct {
	Load Options
	Put  PutOptions
}

// Import loads the dataset file src (see Load) and puts it at
// branch:path (see Put). The provenance records ImportTask, the source
// file's SHA-256 under its base name and the hash of the load options, so
// the table says which file and which mapping made it. It returns the
// commit and the number of rows. A file without a row is an error
// (tables.ErrNoRows) and nothing is put.
func Import(ctx context.Context, st artifacts.Store, branch, path, src string, opts *ImportOptions) (artifacts.Commit, int, error) {
	var o ImportOptions
	if opts != nil {
		o = *opts
	}
	sum, err := fileDigest(src)
	if err != nil {
		return artifacts.Commit{}, 0, err
	}
	rows, err := Load(src, &o.Load)
	if err != nil {
		return artifacts.Commit{}, 0, err
	}
	if len(rows) == 0 {
		return artifacts.Commit{}, 0, fmt.Errorf("import %s: %w: the file is empty (or holds only blank lines, or a Parquet schema alone); check that this is the dataset you meant: %w",
			src, tables.ErrNoRows, ErrInvalid)
	}
	cfg, err := json.Marshal(o.Load)
	if err != nil {
		return artifacts.Commit{}, 0, fmt.Errorf("import %s: encode the load options: %w", src, err)
	}
	h := sha256.Sum256(cfg)
	p := &o.Put.Provenance
	if p.Task == "" {
		p.Task, p.TaskVersion = ImportTask, ImportVersion
	}
	p.Inputs = maps.Clone(p.Inputs) // the caller's map stays as it was
	if p.Inputs == nil {
		p.Inputs = map[string]string{}
	}
	p.Inputs[filepath.Base(src)] = sum
	if p.ConfigHash == "" {
		p.ConfigHash = "sha256:" + hex.EncodeToString(h[:])
	}
	if o.Put.Message == "" {
		o.Put.Message = fmt.Sprintf("datasets: import %s (%d prompts, %s) to %s", filepath.Base(src), len(rows), sum[:len("sha256:")+12], path)
	}
	c, err := Put(ctx, st, branch, path, rows, &o.Put)
	return c, len(rows), err
}

func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("import %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("import %s: %w", path, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

package trackers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
)

var _ CheckpointKeeper = (*MLflow)(nil)

// ErrArtifactStore: the MLflow run's artifact root is one rlpipe does not
// write (s3://, gs://, …): the server must proxy artifacts.
var ErrArtifactStore = errors.New("artifact store not supported")

// KeepsCheckpoints says the entry sets artifacts: checkpoints.
func (m *MLflow) KeepsCheckpoints() bool { return m.checkpoints }

// KeepCheckpoint uploads c's files to the run's artifacts under
// checkpoints/<c.Name>, as mlflow.log_artifacts(dir, "checkpoints/NAME")
// does: through the server's artifact proxy when the run's artifact root
// is mlflow-artifacts:/ (a server with --serve-artifacts, its default),
// or by a copy when it is a path on this machine (a server whose
// --default-artifact-root is local). Another root (s3://, gs://) is
// ErrArtifactStore. A file uploaded again is replaced.
func (m *MLflow) KeepCheckpoint(ctx context.Context, c Checkpoint) error {
	if m.runID == "" {
		return errors.New("mlflow: KeepCheckpoint before Start")
	}
	dest := "checkpoints/" + c.Name
	root := m.artifactURI
	var err error
	switch u, perr := url.Parse(root); {
	case perr == nil && u.Scheme == "mlflow-artifacts":
		// mlflow-artifacts:/1/RUN/artifacts or mlflow-artifacts://HOST/…:
		// the path below the proxy, on the server the tracker talks to.
		err = m.eachFile(c.Dir, func(rel, local string) error {
			return m.putArtifact(ctx, strings.TrimPrefix(u.Path, "/")+"/"+dest+"/"+rel, local)
		})
	case perr == nil && (u.Scheme == "file" || (u.Scheme == "" && filepath.IsAbs(root))):
		dir := filepath.Join(filepath.FromSlash(u.Path), filepath.FromSlash(dest))
		err = m.eachFile(c.Dir, func(rel, local string) error {
			return copyFile(local, filepath.Join(dir, filepath.FromSlash(rel)))
		})
	default:
		return fmt.Errorf("mlflow: keep checkpoint %s in run %s: %w: the run's artifact root is %q; start the server with --serve-artifacts (its default) and without a --default-artifact-root of that scheme, so that rlpipe uploads through the server: %w",
			c.Name, m.runID, ErrArtifactStore, root, errors.ErrUnsupported)
	}
	if err != nil {
		return fmt.Errorf("mlflow: keep checkpoint %s in run %s: %w", c.Name, m.runID, err)
	}
	return nil
}

// eachFile calls fn with the slash path below dir and the local path of
// every file under dir, in lexical order.
func (m *MLflow) eachFile(dir string, fn func(rel, local string) error) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel), p)
	})
}

// putArtifact uploads the file local to the artifact proxy at p.
func (m *MLflow) putArtifact(ctx context.Context, p, local string) error {
	f, err := os.Open(local)
	if err != nil {
		return fmt.Errorf("upload %s: %w", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("upload %s: %w", p, err)
	}
	var esc []string
	for _, s := range strings.Split(path.Clean(p), "/") {
		esc = append(esc, url.PathEscape(s))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, m.artifactsBase+strings.Join(esc, "/"), f)
	if err != nil {
		return fmt.Errorf("upload %s: %w", p, err)
	}
	req.ContentLength = fi.Size()
	req.Header.Set("Content-Type", "application/octet-stream")
	m.auth(req)
	resp, err := m.client.Do(req)
	if err != nil {
		return fmt.Errorf("upload %s: %w", p, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("upload %s: %d %s: %s", p, resp.StatusCode, http.StatusText(resp.StatusCode), truncate(strings.TrimSpace(string(raw)), 200))
	}
	return nil
}

// copyFile copies src to dst, making dst's directory.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := writeFile(dst, in); err != nil {
		return fmt.Errorf("copy to %s: %w", dst, err)
	}
	return nil
}

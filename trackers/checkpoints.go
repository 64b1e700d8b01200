package trackers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
)

// ArtifactsCheckpoints is the value of a tracking entry's artifacts key
// that keeps the weights of every evaluated checkpoint in the tracker
// (MLflow and W&B; TensorBoard keeps no artifacts).
const ArtifactsCheckpoints = "checkpoints"

// validateArtifacts checks the value of an artifacts key.
func validateArtifacts(v string) error {
	if v != "" && v != ArtifactsCheckpoints {
		return fmt.Errorf("artifacts: %q is not what a tracker keeps: write artifacts: %s (the adapter or weights of every evaluated checkpoint), or leave the key out", v, ArtifactsCheckpoints)
	}
	return nil
}

// Checkpoint is the adapter or weights of an evaluated checkpoint, as a
// tracker keeps them.
type Checkpoint struct {
	// Iteration is the checkpoint's iteration (its points' step), and
	// Name the checkpoint's name in evaluations ("iteration-000002").
	Iteration int
	Name      string
	// Dir is a local directory holding the checkpoint's files (its
	// iteration's runs.AdapterDir); it is removed after the call.
	Dir string
	// Commit is the store commit that holds the checkpoint.
	Commit string
}

// A CheckpointKeeper is a tracker that keeps the adapter or weights of
// each evaluated checkpoint as an artifact of its run, when its tracking
// entry sets artifacts: checkpoints. The feed and Backfill call
// KeepCheckpoint after the Log of the checkpoint's evaluation.
type CheckpointKeeper interface {
	// KeepsCheckpoints says the tracking entry asked for the checkpoints.
	KeepsCheckpoints() bool
	// KeepCheckpoint uploads c's files. Keeping a checkpoint again (a
	// retry, a back-fill) must do no harm.
	KeepCheckpoint(ctx context.Context, c Checkpoint) error
}

// keeper is t as a CheckpointKeeper that asked for checkpoints, or nil.
func keeper(t Tracker) CheckpointKeeper {
	if k, ok := t.(CheckpointKeeper); ok && k.KeepsCheckpoints() {
		return k
	}
	return nil
}

// checkpoints are the checkpoints the evaluation points among points
// evaluated: the run's own (not the starting policy, checkpoint 0), each
// once, with the commit of its iteration.
func checkpoints(points []Point) []Checkpoint {
	var out []Checkpoint
	seen := map[int]bool{}
	for _, p := range points {
		c := p.Text[TagCommit]
		if p.Checkpoint == "" || p.Step == 0 || c == "" || seen[p.Step] {
			continue
		}
		seen[p.Step] = true
		out = append(out, Checkpoint{Iteration: p.Step, Name: p.Checkpoint, Commit: c})
	}
	return out
}

// keepCheckpoint copies checkpoint c's directory out of st into a
// temporary directory and hands it to k.
func keepCheckpoint(ctx context.Context, st artifacts.Store, k CheckpointKeeper, c Checkpoint) error {
	dir, err := os.MkdirTemp("", "rlpipe-checkpoint-")
	if err != nil {
		return fmt.Errorf("keep checkpoint %s: %w", c.Name, err)
	}
	defer os.RemoveAll(dir)
	prefix := runs.AdapterPath(c.Iteration)
	n, err := checkoutDir(ctx, st, c.Commit, prefix, dir)
	if err != nil {
		return fmt.Errorf("keep checkpoint %s: %w", c.Name, err)
	}
	if n == 0 {
		return fmt.Errorf("keep checkpoint %s: %w: no directory %s at commit %s (`rlpipe ls %s:%s` lists it)",
			c.Name, artifacts.ErrObjectNotFound, prefix, c.Commit, c.Commit, runs.IterationDir(c.Iteration))
	}
	c.Dir = dir
	return k.KeepCheckpoint(ctx, c)
}

// checkoutDir copies the objects under prefix at ref into dir, keeping
// their paths below prefix; it returns how many it copied.
func checkoutDir(ctx context.Context, st artifacts.Store, ref, prefix, dir string) (int, error) {
	prefix = strings.TrimSuffix(prefix, "/") + "/"
	n := 0
	for e, err := range st.ListObjects(ctx, ref, &artifacts.ListOptions{Prefix: prefix}) {
		if err != nil {
			return n, fmt.Errorf("list %s:%s: %w", ref, prefix, err)
		}
		if e.CommonPrefix {
			continue
		}
		if err := copyObject(ctx, st, ref, e.Path, filepath.Join(dir, filepath.FromSlash(e.Path[len(prefix):]))); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// copyObject writes ref:path to the file dst.
func copyObject(ctx context.Context, st artifacts.Store, ref, path, dst string) error {
	rc, _, err := st.GetObject(ctx, ref, path)
	if err != nil {
		return fmt.Errorf("read %s:%s: %w", ref, path, err)
	}
	defer rc.Close()
	if err := writeFile(dst, rc); err != nil {
		return fmt.Errorf("copy %s:%s: %w", ref, path, err)
	}
	return nil
}

// writeFile writes what r reads to the file dst, making its directory.
func writeFile(dst string, r io.Reader) (err error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	_, err = io.Copy(f, r)
	return err
}

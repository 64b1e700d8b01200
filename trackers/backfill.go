package trackers

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
)

// NewRun describes run name to trackers from its effective config (YAML,
// secrets redacted) and the config's hash.
func NewRun(name string, config []byte, hash string) (Run, error) {
	params, err := Params(config)
	if err != nil {
		return Run{}, fmt.Errorf("run %s: %w", name, err)
	}
	return Run{Name: name, Config: config, ConfigHash: hash, Params: params}, nil
}

// ReadRun describes run name as recorded at ref: its config (runs.ConfigPath)
// and the hash in the config's header.
func ReadRun(ctx context.Context, st artifacts.Store, name, ref string) (Run, error) {
	cfg, err := artifacts.ReadObject(ctx, st, ref, runs.ConfigPath)
	if err != nil {
		return Run{}, fmt.Errorf("run %s: read %s: %w", name, runs.ConfigPath, err)
	}
	hash := ""
	sc := bufio.NewScanner(bytes.NewReader(cfg))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "#") {
			break
		}
		if h, ok := strings.CutPrefix(line, "# config-hash: "); ok {
			hash = strings.TrimSpace(h)
		}
	}
	return NewRun(name, cfg, hash)
}

// Backfill sends everything run recorded at ref (History) to t, in
// batches, then, to a tracker that keeps them (CheckpointKeeper), the
// checkpoints of every evaluation, and ends t with o (Tracker.End; a zero Time is now): what
// `rlpipe track` does after a run whose tracker was down. Points t
// already has are written again, with the same values. t is ended also
// when the back-fill fails, so that it is released. It returns the
// number of points sent.
func Backfill(ctx context.Context, st artifacts.Store, run Run, ref string, t Tracker, o Outcome) (n int, err error) {
	if o.Time.IsZero() {
		o.Time = time.Now()
	}
	defer func() {
		if eerr := t.End(ctx, o); eerr != nil && err == nil {
			err = eerr
		}
	}()
	points, err := History(ctx, st, run.Name, ref)
	if err != nil {
		return 0, err
	}
	if err := t.Start(ctx, run); err != nil {
		return 0, err
	}
	const batch = 64
	for i := 0; i < len(points); i += batch {
		if err := t.Log(ctx, points[i:min(i+batch, len(points))]); err != nil {
			return i, err
		}
	}
	return len(points), KeepCheckpoints(ctx, st, t, points)
}

// KeepCheckpoints hands t, when it keeps checkpoints (a
// CheckpointKeeper whose entry asked for them), the adapter or weights
// of every checkpoint an evaluation among points evaluated (not the
// starting policy's), each copied out of st; the first failure stops it.
func KeepCheckpoints(ctx context.Context, st artifacts.Store, t Tracker, points []Point) error {
	k := keeper(t)
	if k == nil {
		return nil
	}
	for _, c := range checkpoints(points) {
		if err := keepCheckpoint(ctx, st, k, c); err != nil {
			return err
		}
	}
	return nil
}

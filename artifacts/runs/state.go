package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/rlpipe/rlpipe/artifacts"
)

// State is the loop's durable state, committed with every iteration at
// StatePath. Cursor counts the prompts consumed by committed iterations:
// a resumed run samples from exactly there, so no prompt is skipped or
// trained twice.
type State struct {
	Iteration int `json:"iteration"`
	Cursor    int `json:"cursor"`
	// Adapters maps recent iterations to their adapter directory on the
	// run branch (enough for the staleness window).
	Adapters map[string]string `json:"adapters"`
	Seed     uint64            `json:"seed"`
}

// ReadState reads the State at ref; nil, nil when ref holds none (a run
// that has committed no iteration).
func ReadState(ctx context.Context, st artifacts.Store, ref string) (*State, error) {
	var s State
	ok, err := readJSON(ctx, st, ref, StatePath, &s)
	if err != nil || !ok {
		return nil, err
	}
	return &s, nil
}

// maxJSON bounds the JSON records the readers decode: they are a few
// kilobytes; a larger one is not a record of a run.
const maxJSON = 16 << 20

// readJSON decodes the JSON object at ref:path into v; ok is false when
// there is no such object.
func readJSON(ctx context.Context, st artifacts.Store, ref, path string, v any) (ok bool, err error) {
	b, err := readSmall(ctx, st, ref, path)
	if err != nil || b == nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s:%s is not a run record: %w", ref, path, err)
	}
	return true, nil
}

// readSmall reads ref:path whole, at most maxJSON bytes; nil, nil when
// there is no such object.
func readSmall(ctx context.Context, st artifacts.Store, ref, path string) ([]byte, error) {
	rc, _, err := st.GetObject(ctx, ref, path)
	if errors.Is(err, artifacts.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s:%s: %w", ref, path, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxJSON+1))
	if err != nil {
		return nil, fmt.Errorf("read %s:%s: %w", ref, path, err)
	}
	if len(b) > maxJSON {
		return nil, fmt.Errorf("read %s:%s: larger than %d bytes, not a run record", ref, path, maxJSON)
	}
	return b, nil
}

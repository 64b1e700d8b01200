package trackers

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
)

// PrefixFilterGroups tags the figures of an iteration's dynamic sampling
// (runs.FilterGroupsFile, written with the file's filter_groups section):
// every number of the record and "rounds", the rounds drawn.
const PrefixFilterGroups = "filter_groups/"

// filterGroups adds the iteration's dynamic sampling figures; nothing
// when the run has no filter_groups section (no such file).
func filterGroups(ctx context.Context, st artifacts.Store, ref string, n int, into map[string]float64) error {
	raw, path, err := iterationObject(ctx, st, ref, n, runs.FilterGroupsFile)
	if err != nil || raw == nil {
		return err
	}
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil {
		return fmt.Errorf("read %s:%s: %w", ref, path, err)
	}
	for k, v := range rec {
		switch v := v.(type) {
		case float64:
			into[PrefixFilterGroups+k] = v
		case []any:
			if k == "rounds" {
				into[PrefixFilterGroups+k] = float64(len(v))
			}
		}
	}
	return nil
}

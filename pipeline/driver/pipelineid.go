package driver

import (
	"strings"

	"github.com/rlpipe/rlpipe/pipeline/config"
)

// PipelineID names a pipeline's tasks in its queue names
// (temporalrun.Queue): a short hash of its config without what only the
// driver reads (the number of iterations, overlap), so that a worker
// serves exactly the pipeline it was started from, and a run extended or
// run on-policy needs no restart of its workers.
func PipelineID(cfg *config.Config) (string, error) {
	c := *cfg
	c.Iterations, c.Overlap.MaxStaleness = 0, 0
	h, err := c.Hash()
	if err != nil {
		return "", err
	}
	h = strings.TrimPrefix(h, "sha256:")
	return h[:12], nil
}

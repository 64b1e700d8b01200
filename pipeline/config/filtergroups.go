package config

import (
	"fmt"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// FilterGroups is the filter_groups section: DAPO's dynamic sampling,
// under verl's name (algorithm.filter_groups). An iteration whose batch
// holds fewer than batch_size groups whose rewards differ draws fresh
// prompts, up to max_num_gen_batches generation batches in all
// (pipeline.LoopConfig.MaxGenBatches).
type FilterGroups struct {
	// MaxNumGenBatches bounds the generation batches (rounds) of one
	// iteration, the first included; at least 1 (1 filters without
	// refilling). verl's 0 (no bound) is refused: a run must end.
	MaxNumGenBatches int `yaml:"max_num_gen_batches"`
}

// maxGenBatches is the section's bound, 0 without the section.
func (f *FilterGroups) maxGenBatches() int {
	if f == nil {
		return 0
	}
	return f.MaxNumGenBatches
}

// filterGroups checks the section: a bound of at least 1, and groups of
// at least two samples (a group of one never has a reward spread, so no
// refill could fill the batch).
func (k *checker) filterGroups() {
	f := k.c.FilterGroups
	if f == nil {
		return
	}
	const key = "filter_groups.max_num_gen_batches"
	if !k.set(key) {
		k.fail("filter_groups", "e.g. filter_groups: {max_num_gen_batches: 3}", "filter_groups: missing key max_num_gen_batches: how many generation batches an iteration may draw, the first included")
		return
	}
	if f.MaxNumGenBatches < 1 {
		k.fail(key, "1 filters without refilling; verl's 0, no bound, is not offered so that a run ends", "%s: must be at least 1, got %d", key, f.MaxNumGenBatches)
	}
	if g := k.c.Stages.Generate; g != nil {
		if gr, ok := g.Options.(kind.Grouped); ok {
			if gkey, n := gr.GroupSize(); n == 1 {
				path := "stages.generate." + gkey
				k.fail(key, fmt.Sprintf("set %s to 2 or more, or remove filter_groups", path),
					"%s: dynamic sampling keeps groups whose rewards differ, but %s is 1, so no group ever does", key, path)
			}
		}
	}
}

// filterGroupsTask is the loop's merge task when the section is set.
func (c *Config) filterGroupsTask() *pipeline.Task {
	if c.FilterGroups == nil {
		return nil
	}
	return pipeline.FilterGroupsTask()
}

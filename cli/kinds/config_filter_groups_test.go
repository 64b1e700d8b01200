package kinds_test

import (
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
)

// TestFilterGroupsSection: filter_groups.max_num_gen_batches reaches the
// loop (LoopConfig.MaxGenBatches, the merge task among the stages, its
// environment defined); without the section the loop is as before. Bad
// values are errors at the key's line and column.
func TestFilterGroupsSection(t *testing.T) {
	reg := kinds.Registry()
	n1 := strings.Replace(grpoBase("filter_groups: {max_num_gen_batches: 3}\n"), "n: 8", "n: 1", 1)
	for _, tc := range []struct {
		name, src string
		max       int
		err       string
	}{
		{name: "absent", src: grpoBase("")},
		{name: "three rounds", src: grpoBase("filter_groups: {max_num_gen_batches: 3}\n"), max: 3},
		{name: "with the stand-in", src: base + "filter_groups: {max_num_gen_batches: 2}\n", max: 2},
		{name: "zero", src: grpoBase("filter_groups: {max_num_gen_batches: 0}\n"),
			err: "pipeline.yaml:15:17: filter_groups.max_num_gen_batches: must be at least 1, got 0 (1 filters without refilling; verl's 0, no bound, is not offered so that a run ends)"},
		{name: "negative", src: grpoBase("filter_groups: {max_num_gen_batches: -2}\n"),
			err: "pipeline.yaml:15:17: filter_groups.max_num_gen_batches: must be at least 1, got -2 (1 filters without refilling; verl's 0, no bound, is not offered so that a run ends)"},
		{name: "missing bound", src: grpoBase("filter_groups: {}\n"),
			err: "pipeline.yaml:15:1: filter_groups: missing key max_num_gen_batches: how many generation batches an iteration may draw, the first included (e.g. filter_groups: {max_num_gen_batches: 3})"},
		{name: "a typo", src: grpoBase("filter_groups: {max_num_gen_batch: 3}\n"),
			err: "pipeline.yaml:15:17: unknown key \"max_num_gen_batch\" in filter_groups (did you mean \"max_num_gen_batches\"?)"},
		{name: "not an integer", src: grpoBase("filter_groups: {max_num_gen_batches: three}\n"),
			err: "pipeline.yaml:15:38: filter_groups.max_num_gen_batches: expected an integer, got \"three\""},
		{name: "groups of one", src: n1,
			err: "pipeline.yaml:15:17: filter_groups.max_num_gen_batches: dynamic sampling keeps groups whose rewards differ, but stages.generate.sampling.n is 1, so no group ever does (set stages.generate.sampling.n to 2 or more, or remove filter_groups)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := plan(tc.src, reg)
			if got := errString(err); got != tc.err {
				t.Fatalf("error %q\nwant  %q", got, tc.err)
			}
			if err != nil {
				return
			}
			_, env := p.Run.Envs[pipeline.FilterGroupsName]
			if p.Loop.MaxGenBatches != tc.max || (p.Stages.FilterGroups != nil) != (tc.max > 0) || env != (tc.max > 0) {
				t.Errorf("max %d, merge task %v, env %v; want max %d", p.Loop.MaxGenBatches, p.Stages.FilterGroups != nil, env, tc.max)
			}
		})
	}
}

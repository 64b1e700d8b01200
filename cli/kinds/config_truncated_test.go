package kinds_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
)

// TestMaskTruncatedCompletions: advantages.mask_truncated_completions
// reaches the advantages step of a grpo train stage (its version names
// it, last) and leaves the version alone when false or absent; a value
// that is not a bool, and the key with a train stage that trains on no
// advantages, are errors at the key.
func TestMaskTruncatedCompletions(t *testing.T) {
	const grpo = "join-2 epsilon=1e-06 no_std=false keep_zero_std=false"
	checkVersions(t, kinds.Registry(), []versionCase{
		{name: "absent", src: grpoBase(""), version: grpo},
		{name: "false", src: grpoBase("advantages: {mask_truncated_completions: false}\n"), version: grpo},
		{name: "true", src: grpoBase("advantages: {mask_truncated_completions: true}\n"), version: grpo + " mask_truncated_completions=true"},
		{name: "with rloo and sample std", src: grpoBase("advantages: {estimator: rloo, std: sample, mask_truncated_completions: true}\n"),
			version: grpo + " std=sample estimator=rloo mask_truncated_completions=true"},
		{name: "not a bool", src: grpoBase("advantages: {mask_truncated_completions: sometimes}\n"),
			err: `pipeline.yaml:15:42: advantages.mask_truncated_completions: expected true or false, got "sometimes"`},
		{name: "a train stage without advantages", src: base + "advantages: {mask_truncated_completions: true}\n",
			err: "pipeline.yaml:14:1: advantages: the train stage (kind standin) trains on no advantages (remove it, or use kind: grpo or kind: external on the train stage)"},
	})
}

package policy_test

import (
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy"
)

// A prompt becomes a request, and each of its samples a trajectory row,
// the same way in the generate stage and in an evaluation.
func ExampleTrajectoryRow() {
	req := policy.PromptRequest(tables.Prompt{PromptID: "p1", Prompt: "2+3="}, 1)
	s := policy.Sampling{N: 1, Temperature: 1, MaxTokens: 4}
	sample := policy.Sample{Text: "5", FinishReason: policy.FinishStop}
	sampler, err := s.JSON()
	if err != nil {
		fmt.Println(err)
	}
	row := policy.TrajectoryRow(sample, req, 0, policy.RowParams{Iteration: 3}, "tiny-arith", sampler)
	fmt.Println(row.GroupID, row.Completion, row.Status, row.NumTokens, row.Sampler)
	// Output: 000003-p1 5 ok 1 {"n":1,"temperature":1,"top_p":0,"max_tokens":4}
}

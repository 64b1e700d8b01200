package reports_test

import (
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/reports"
)

// A run whose completions grow every iteration while held-out accuracy
// stays flat: the length and reward-vs-held-out rules fire.
func ExampleDetect() {
	var health []reports.Health
	for it := 1; it <= 20; it++ {
		var trajs []tables.Trajectory
		var rws []tables.Reward
		for s := int32(0); s < 4; s++ {
			trajs = append(trajs, tables.Trajectory{PromptID: "p", SampleIndex: s, Status: tables.StatusOK,
				Completion: fmt.Sprint(it, s), NumTokens: int32(2 * it), FinishReason: "stop"})
			rws = append(rws, tables.Reward{PromptID: "p", SampleIndex: s, Status: tables.StatusOK,
				Total: 0.04 * float64(it), Components: map[string]float64{"length": 0.04 * float64(it)}})
		}
		health = append(health, reports.ComputeHealth(it, trajs, rws, nil, nil))
	}
	evals := []reports.Eval{
		{Iteration: 0, Set: "heldout", Metrics: map[string]float64{"pass@1": 0.31}},
		{Iteration: 10, Set: "heldout", Metrics: map[string]float64{"pass@1": 0.30}},
	}
	alarms, err := reports.Detect(health, evals, nil)
	if err != nil {
		panic(err)
	}
	for _, a := range alarms {
		fmt.Printf("%s at %d-%d\n", a.Rule, a.Iteration, a.LastIteration)
	}
	// Output:
	// reward-up-heldout-flat at 10-10
	// length-drift-up at 10-20
}

package advantages_test

import (
	"fmt"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

func ExampleCompute() {
	rewards := []tables.Reward{
		{PromptID: "p1", SampleIndex: 0, Total: 1, Status: tables.StatusOK},
		{PromptID: "p1", SampleIndex: 1, Total: 0, Status: tables.StatusOK},
		{PromptID: "p1", SampleIndex: 2, Status: "error"},
		{PromptID: "p2", SampleIndex: 0, Total: 1, Status: tables.StatusOK},
	}
	adv, st := advantages.Compute(rewards, advantages.Options{NoStd: true})
	for _, a := range adv {
		fmt.Printf("%s/%d advantage %+.1f mask %v %q\n", a.PromptID, a.SampleIndex, a.Advantage, a.Mask, a.Reason)
	}
	fmt.Printf("%+v\n", st)
	// Output:
	// p1/0 advantage +0.5 mask false ""
	// p1/1 advantage -0.5 mask false ""
	// p1/2 advantage +0.0 mask true "reward status error"
	// p2/0 advantage +0.0 mask true "alone in its group"
	// {Groups:2 MultiSample:1 ZeroStd:0 Masked:2}
}

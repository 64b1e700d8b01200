package embedded_test

import (
	"context"
	"fmt"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/embedded"
)

// Open the shipped model through the registry, served on loopback, and
// sample one completion over HTTP.
func Example() {
	ctx := context.Background()
	opened, err := embedded.Backend.Open(ctx, policy.Spec{Kind: embedded.Kind, Options: &embedded.PolicyOptions{Serve: embedded.ServeHTTP}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer opened.Close()
	_, exact := opened.Model.(policy.ExactScorer) // the in-process model computes exact pass@1
	out, err := opened.Policy.Generate(ctx, []policy.Request{{ID: "p1", Prompt: "12+30=", Seed: 7}},
		policy.Sampling{N: 1, Temperature: 0, MaxTokens: 6})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(exact, len(out), len(out[0]), out[0][0].FinishReason != policy.FinishError)
	// Output: true 1 1 true
}

package environments_test

import (
	"context"
	"fmt"

	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/guess"
)

// A scripted policy that halves the range plays guess the number.
func ExampleRunner_Run() {
	r, err := environments.NewRunner(environments.Scripted(bisect), &environments.RunnerOptions{MaxTurns: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := r.Run(context.Background(), guess.New(nil), environments.Episode{ID: "guess-0001"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range res.Trajectory.Turns {
		fmt.Printf("%s: %s\n", t.Role, t.Content)
	}
	fmt.Println(res.Trajectory.Status, res.Reward)
	// Output:
	// user: I am thinking of a whole number from 1 to 100. Guess it: reply with one number, and I will say higher, lower or correct.
	// assistant: 50
	// user: lower
	// assistant: 25
	// user: higher
	// assistant: 37
	// user: higher
	// assistant: 43
	// user: lower
	// assistant: 40
	// user: higher
	// assistant: 41
	// user: correct
	// ok 0.75
}

// The same episode id always draws the same number.
func ExampleRNG() {
	fmt.Println(environments.RNG("guess-0001").IntN(100) == environments.RNG("guess-0001").IntN(100))
	// Output: true
}

package guess_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/rlpipe/rlpipe/environments/guess"
)

func TestGuessRepliesWithoutNumbers(t *testing.T) {
	ctx := context.Background()
	env := guess.New(&guess.Options{Min: 1, Max: 3, Penalty: 0.25})
	if _, err := env.Step(ctx, "2"); err == nil {
		t.Fatal("Step before Reset succeeded")
	}
	if _, err := env.Reset(ctx, "guess-0001"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		action, obs string
		done        bool
		reward      float64
	}{
		{"no idea", "Reply with a whole number from 1 to 3.", false, 0},
		{"7", "7 is out of range: guess from 1 to 3.", false, 0},
		{"I say " + strconv.Itoa(env.Secret()) + ".", guess.Correct, true, 0.5},
	} {
		st, err := env.Step(ctx, c.action)
		if err != nil || st.Observation != c.obs || st.Done != c.done || st.Reward != c.reward {
			t.Fatalf("Step(%q) = %+v, %v; want %q, done %v, reward %v", c.action, st, err, c.obs, c.done, c.reward)
		}
	}
}

func ExampleEnv() {
	ctx := context.Background()
	env := guess.New(nil)
	obs, _ := env.Reset(ctx, "guess-0001")
	fmt.Println(obs)
	for _, g := range []string{"50", "my guess is 30", "41"} {
		st, _ := env.Step(ctx, g)
		fmt.Println(g, "->", st.Observation, st.Reward, st.Done)
	}
	// Output:
	// I am thinking of a whole number from 1 to 100. Guess it: reply with one number, and I will say higher, lower or correct.
	// 50 -> lower 0 false
	// my guess is 30 -> higher 0 false
	// 41 -> correct 0.9 true
}

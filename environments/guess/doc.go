// Package guess is a multi-turn text environment, "guess the number", the
// smallest that needs several turns and rewards a good strategy.
//
// Reset draws a whole number from 1 to 100 from the episode's RNG
// (environments.RNG of the episode id, so an id always means the same
// number). Each Step reads the first whole number of the policy's reply as
// a guess and answers "higher", "lower" or "correct". A correct guess ends
// the episode with reward 1 minus Penalty (0.05) for every reply before
// it: halving the range finds any number within 7 replies, for a reward of
// at least 0.7, while guessing upwards from 1 may earn nothing. A reply
// without a number, or out of range, costs a reply and is answered with a
// reminder of the rules.
//
//	runner, _ := environments.NewRunner(p, &environments.RunnerOptions{MaxTurns: 10})
//	res, err := runner.Run(ctx, guess.New(nil), environments.Episode{ID: "guess-0001"})
//	// res.Trajectory.Turns: the intro, then a guess and "higher"/"lower" per turn
package guess

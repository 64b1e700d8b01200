package guess

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/rlpipe/rlpipe/environments"
)

// Defaults of Options.
const (
	DefaultMin     = 1
	DefaultMax     = 100
	DefaultPenalty = 0.05
)

// Replies to a guess.
const (
	Higher  = "higher"
	Lower   = "lower"
	Correct = "correct"
)

// Options tune an Env. A nil *Options means the defaults.
type Options struct {
	// Min and Max bound the secret number; zero values mean 1 and 100.
	Min, Max int
	// Penalty is subtracted from the reward of 1 for each reply before the
	// correct one; 0 means DefaultPenalty, negative means none. The reward
	// is never below 0.
	Penalty float64
}

// Env is one guess-the-number environment.
type Env struct {
	o       Options
	secret  int
	replies int
	active  bool
}

var _ environments.Env = (*Env)(nil)

// New returns an Env.
func New(opts *Options) *Env {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Min == 0 && o.Max == 0 {
		o.Min, o.Max = DefaultMin, DefaultMax
	}
	if o.Max < o.Min {
		o.Max = o.Min
	}
	switch {
	case o.Penalty == 0:
		o.Penalty = DefaultPenalty
	case o.Penalty < 0:
		o.Penalty = 0
	}
	return &Env{o: o}
}

// Reset draws the secret number of episode id and asks for a guess.
func (e *Env) Reset(_ context.Context, id string) (string, error) {
	e.secret = e.o.Min + environments.RNG(id).IntN(e.o.Max-e.o.Min+1)
	e.replies, e.active = 0, true
	return fmt.Sprintf("I am thinking of a whole number from %d to %d. Guess it: reply with one number, "+
		"and I will say %s, %s or %s.", e.o.Min, e.o.Max, Higher, Lower, Correct), nil
}

// Secret returns the number of the current episode.
func (e *Env) Secret() int { return e.secret }

var number = regexp.MustCompile(`-?\d+`)

// Step reads the first whole number in action as the guess.
func (e *Env) Step(_ context.Context, action string) (environments.Step, error) {
	if !e.active {
		return environments.Step{}, errors.New("guess: Step without an episode: call Reset first")
	}
	e.replies++
	info := map[string]any{"secret": e.secret, "replies": e.replies}
	m := number.FindString(action)
	n, err := strconv.Atoi(m)
	switch {
	case m == "" || err != nil:
		return environments.Step{Observation: fmt.Sprintf("Reply with a whole number from %d to %d.", e.o.Min, e.o.Max), Info: info}, nil
	case n < e.o.Min || n > e.o.Max:
		return environments.Step{Observation: fmt.Sprintf("%d is out of range: guess from %d to %d.", n, e.o.Min, e.o.Max), Info: info}, nil
	case n < e.secret:
		return environments.Step{Observation: Higher, Info: info}, nil
	case n > e.secret:
		return environments.Step{Observation: Lower, Info: info}, nil
	}
	e.active = false
	reward := max(0, 1-e.o.Penalty*float64(e.replies-1))
	return environments.Step{Observation: Correct, Reward: reward, Done: true, Info: info}, nil
}

// End ends the episode.
func (e *Env) End() error {
	e.active = false
	return nil
}

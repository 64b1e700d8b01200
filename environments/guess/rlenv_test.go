package guess_test

import (
	"strconv"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments/envtest"
	"github.com/rlpipe/rlpipe/environments/guess"
)

// TestRLEnv runs the game through the environments' suite with a player
// that bisects the default range on higher and lower: it finds the
// secret within 7 guesses.
func TestRLEnv(t *testing.T) {
	envtest.Run(t, envtest.Suite{Env: guess.RLEnv, Prompt: tables.Prompt{PromptID: "guess"}, MaxSteps: 7,
		Player: func() func(string) string {
			lo, hi, last := guess.DefaultMin, guess.DefaultMax, 0
			return func(obs string) string {
				switch obs {
				case guess.Higher:
					lo = last + 1
				case guess.Lower:
					hi = last - 1
				}
				last = (lo + hi) / 2
				return strconv.Itoa(last)
			}
		}})
}

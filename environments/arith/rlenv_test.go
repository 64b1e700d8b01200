package arith_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments/arith"
	"github.com/rlpipe/rlpipe/environments/envtest"
)

// TestChainRLEnv runs chain (three running sums) through the
// environments' suite with a player that adds each "a+b=" it is shown:
// four answers end the episode.
func TestChainRLEnv(t *testing.T) {
	envtest.Run(t, envtest.Suite{Env: arith.ChainEnv, Options: &arith.ChainOptions{Steps: 3},
		Prompt: tables.Prompt{PromptID: "arith-3+4"}, MaxSteps: 4,
		Player: func() func(string) string {
			return func(obs string) string {
				a, b, _ := strings.Cut(strings.TrimSuffix(obs, "="), "+")
				x, _ := strconv.Atoi(a)
				y, _ := strconv.Atoi(b)
				return strconv.Itoa(x + y)
			}
		}})
}

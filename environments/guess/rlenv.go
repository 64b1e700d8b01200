package guess

import (
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
)

// RLEnv is the game as an episodes stage's rl_env "guess": one secret per
// episode id, the default range, no rl_options.
var RLEnv = environments.Func("guess", func(tables.Prompt) (environments.Env, error) { return New(nil), nil })

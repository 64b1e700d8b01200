package environments

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"math/rand/v2"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Env is a multi-turn environment. It runs one episode at a time: Reset
// starts one, Step advances it by one action of the policy, End releases
// it. Run one Env per concurrent episode.
type Env interface {
	// Reset starts the episode id and returns its first observation. All
	// of the episode's randomness must come from RNG(id) (or Seed(id)), so
	// the same id replays the same episode.
	Reset(ctx context.Context, id string) (string, error)
	// Step applies action, the policy's whole reply, and says what follows.
	// A malformed action is the policy's mistake, answered with an
	// observation, not an error. An error means the episode cannot go on;
	// wrap ErrInfra when the environment's machinery failed (a sandbox
	// that does not start) rather than the episode.
	Step(ctx context.Context, action string) (Step, error)
	// End ends the current episode, however it went, and releases what it
	// holds (a world copy, a process). End without an episode does nothing.
	End() error
}

// Maker makes a fresh environment for an episode of one prompt (the
// prompt row may carry the problem: a question, an answer, metadata). The
// Env it returns runs that episode only.
type Maker func(p tables.Prompt) (Env, error)

// Step is what an action led to.
type Step struct {
	// Observation is shown to the policy next (and recorded when Done).
	Observation string
	// Reward is this step's reward; an episode's reward is their sum.
	Reward float64
	// Done ends the episode.
	Done bool
	// ToolCalls describes the tool calls found in the action as JSON text,
	// "" when there are none; it becomes the assistant turn's tool_calls.
	// An env offering tools (ToolOffer) may leave it "": the runner then
	// records the calls it answered in OpenAI's tool_calls shape.
	ToolCalls string
	// ToolResults answer the function-calling calls of the action, one
	// per call in order, for an env offering tools (ToolOffer): each goes
	// back to the policy as a message of role "tool". Nil otherwise: a
	// non-nil list of another length than the calls ends the episode
	// env_error.
	ToolResults []string
	// Info holds facts about the step worth recording (a verifier's
	// output, the secret number); the runner merges each step's Info into
	// Result.Info, later keys winning.
	Info map[string]any
}

// ErrInfra marks an environment failure that is not the episode's fault:
// the runner records the episode as infra_error (retry it elsewhere)
// instead of env_error.
var ErrInfra = errors.New("environment infrastructure failure")

// Seed returns the 64-bit FNV-1a hash of an episode id: the seed of the
// episode's randomness.
func Seed(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

// RNG returns the episode's random number generator: a PCG seeded with
// Seed(id) and its byte-reversed value. Two calls with the same id give
// the same stream.
func RNG(id string) *rand.Rand {
	s := Seed(id)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], s)
	return rand.New(rand.NewPCG(s, binary.BigEndian.Uint64(b[:])))
}

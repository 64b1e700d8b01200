package policytest

import (
	"testing"

	"github.com/rlpipe/rlpipe/internal/suite"
	"github.com/rlpipe/rlpipe/policy"
)

// AdapterName is the name the suite loads Backend.AdapterDir under, and
// the Sampling.Adapter of a Golden that samples from it.
const AdapterName = "policytest"

// Backend is a policy under test and what the suite needs to know of it.
type Backend struct {
	// Policy is the policy under test, with no adapter loaded. The
	// adapter checks run when it is also a policy.AdapterLoader and
	// AdapterDir is set.
	Policy policy.Policy
	// Prompts are at least two distinct prompts the policy serves with
	// MaxTokens new tokens: in its vocabulary, short enough for its
	// context. At temperature 1 their samples must vary with the seed
	// (a prompt the model is sure of varies with none).
	Prompts []string
	// MaxTokens is a completion budget every prompt fits; the greedy
	// completion of at least one prompt must be two tokens long or more
	// within it (the MaxTokens and stop-string checks cut it short).
	MaxTokens int
	// Invalid is a prompt the policy cannot serve — a character outside
	// its vocabulary, a prompt longer than its context — whose samples
	// have policy.StatusInvalid; "" skips that check.
	Invalid string
	// Version is the PolicyVersion of the base model's samples, and
	// Version+"+"+AdapterName that of the adapter's; "" checks only that
	// versions are set and that the adapter's differs from the base's.
	Version string
	// NoAdapters says the policy loads no adapters (it is not a
	// policy.AdapterLoader): it serves a pipeline's first iteration only,
	// since the plan refuses it for a loop that samples a trained adapter.
	// Without it the suite requires policy.AdapterLoader.
	NoAdapters bool
	// AdapterDir is a PEFT adapter directory the policy reads (on a
	// server: a path on the server's machine) whose greedy completion of
	// at least one of Prompts differs from the base model's; "" skips the
	// adapter checks.
	AdapterDir string
	// Golden pins exact samples of a deterministic policy.
	Golden []Golden
}

// Golden is one call and the exact samples it must return.
type Golden struct {
	Name     string
	Requests []policy.Request
	// Sampling is the call's; Adapter AdapterName samples from
	// Backend.AdapterDir, which the suite loads first.
	Sampling policy.Sampling
	// Want holds the samples of each request, compared field by field:
	// texts, token ids and finish reasons exactly, log-probabilities bit
	// for bit.
	Want [][]policy.Sample
}

// NewBackend returns a fresh backend, its policy holding no adapter. It
// registers its own cleanup with t.Cleanup and must be safe to call from
// parallel tests.
type NewBackend = func(t *testing.T) Backend

// scenario is one behaviour checked against a fresh backend.
type scenario = suite.Scenario[*fixture]

// Run checks that the policies newBackend returns behave as the
// policy.Policy contract says: N samples per request, seeded
// determinism, log-probabilities, finish reasons and statuses,
// validation, cancellation, adapters (policy.AdapterLoader) and the
// backend's golden samples. Each behaviour is a subtest with a backend
// of its own, and subtests run in parallel.
func Run(t *testing.T, newBackend NewBackend) {
	groups := []suite.Group[*fixture]{
		{Name: "Samples", Scenarios: []scenario{
			{Name: "N", Run: testN},
			{Name: "NZeroMeansOne", Run: testNZero},
			{Name: "Chat", Run: testChat},
			{Name: "MaxTokens", Run: testMaxTokens},
			{Name: "Stop", Run: testStop},
		}},
		{Name: "Seeds", Scenarios: []scenario{
			{Name: "Deterministic", Run: testDeterministic},
			{Name: "Batching", Run: testBatching},
			{Name: "SeedsDiffer", Run: testSeedsDiffer},
			{Name: "Greedy", Run: testGreedy},
		}},
		{Name: "Logprobs", Scenarios: []scenario{
			{Name: "OnePerToken", Run: testLogprobsPerToken},
			{Name: "OnlyWhenAsked", Run: testLogprobsOnlyWhenAsked},
		}},
		{Name: "Errors", Scenarios: []scenario{
			{Name: "InvalidPrompt", Run: testInvalidPrompt},
			{Name: "PromptAndMessages", Run: testPromptAndMessages},
			{Name: "BadSampling", Run: testBadSampling},
			{Name: "Canceled", Run: testCanceled},
		}},
		{Name: "Adapters", Scenarios: []scenario{
			{Name: "Capability", Run: testAdapterCapability},
			{Name: "NotLoaded", Run: testAdapterNotLoaded},
			{Name: "Load", Run: testAdapterLoad},
			{Name: "Unload", Run: testAdapterUnload},
			{Name: "LoadMissingDir", Run: testAdapterLoadMissingDir},
		}},
		{Name: "Golden", Scenarios: []scenario{{Name: "Exact", Run: testGolden}}},
	}
	suite.Run(t, groups, func(t *testing.T) *fixture { return newFixture(t, newBackend) })
}

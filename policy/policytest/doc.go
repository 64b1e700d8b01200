// Package policytest is the conformance suite every policy.Policy
// backend runs: one test body, every backend, so that a trainer gets the
// same samples, seeds, statuses and adapters from the embedded model in
// process, behind `rlpipe policy serve`, or from any other server.
//
// A backend calls Run from its own tests with a function that returns a
// fresh Backend: the policy, holding no adapter, and what the suite needs
// to know of it — prompts it serves, a completion budget, optionally a
// prompt it cannot serve, its version, an adapter directory and golden
// samples. For the embedded model:
//
//	func TestConformance(t *testing.T) {
//		policytest.Run(t, func(t *testing.T) policytest.Backend {
//			m, err := tiny.Embedded()
//			if err != nil {
//				t.Fatal(err)
//			}
//			return policytest.Backend{Policy: tiny.NewPolicy(m),
//				Prompts: []string{"123+456=", "77+642="}, MaxTokens: 6, Invalid: "12+x="}
//		})
//	}
//
// Behind a policy server, the function serves the policy with
// servertest.Loopback and returns the client. Run groups behaviours and
// checks each in a subtest of its own with a fresh backend; subtests run
// in parallel, so the function must be safe to call concurrently. Select
// behaviours with -run, e.g. -run 'TestConformance/Adapters/'.
//
// What a backend implements, and what the suite checks of it:
//
//   - Required: policy.Policy (Generate), the behaviours below.
//   - Required for a pipeline, which samples the adapter it trains from
//     iteration 2 and evaluates each checkpoint's: policy.AdapterLoader.
//     The suite fails a backend without it unless Backend.NoAdapters says
//     so (the Capability scenario), and pipeline/config's plan refuses
//     such a policy before any task runs when the loop would load an
//     adapter into it.
//   - Optional: policy.TokenTexter (the policy server spells tokens with
//     it), policy.Checked options and policy.Nouned (the pipeline config
//     checks and names the backend's section with them).
//
// The behaviours, each a group of subtests:
//
//   - Samples: N samples per request (N 0 is one), in index order, each
//     naming its request and the policy's version; chat transcripts
//     beside prompts; MaxTokens ends a completion with FinishLength, a
//     stop string with FinishStop, cut where it first appears.
//   - Seeds: the same requests, seeds and sampling give byte-identical
//     samples; sample j of a request is the same alone or in a batch and
//     with any N > j (policy.SampleSeed); other seeds and other indices
//     give other samples at temperature 1; temperature 0 gives one.
//   - Logprobs: asked for, one finite log-probability ≤ 0 per token;
//     otherwise none; asking does not change what is sampled.
//   - Errors: a prompt the policy cannot serve, or with both a prompt
//     and messages, gives samples with policy.StatusInvalid while the
//     rest of the batch is served; sampling policy.Validate refuses fails
//     the call or makes every sample invalid (the embedded model returns
//     the error, the OpenAI client invalid samples: both are allowed); a
//     canceled context fails the call with context.Canceled.
//   - Adapters: the policy is a policy.AdapterLoader, or the backend
//     sets NoAdapters. With Backend.AdapterDir, an adapter not loaded is
//     policy.ErrAdapterNotLoaded; a loaded one
//     changes a greedy completion, under a version of its own, and
//     leaves the base model's samples as they were; unloading it, or a
//     load from a missing directory, leaves it not loaded.
//   - Golden: the backend's pinned calls return exactly their samples,
//     log-probabilities bit for bit.
//
// No assertion depends on timing: seeds are fixed and a deterministic
// backend pins its numbers in Backend.Golden.
package policytest

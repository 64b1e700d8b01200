// Package embedded is the policy backend "embedded": the tiny model
// (policy/tiny) with its shipped weights or a safetensors file, sampled in
// process or served on loopback over the OpenAI API (policy/server) and
// sampled through the OpenAI client (policy/openai), which is the path a
// user of vLLM takes. Importing the package registers the backend:
//
//	import _ "github.com/rlpipe/rlpipe/policy/embedded"
//
//	opened, err := embedded.Backend.Open(ctx, policy.Spec{Kind: "embedded", Options: &embedded.PolicyOptions{Serve: embedded.ServeHTTP}})
//	defer opened.Close()
//	exact, ok := opened.Model.(policy.ExactScorer) // the in-process model's capabilities
//
// Opened.Model is the *tiny.Model: a policy.ExactScorer (evaluation's
// exact pass@1) and a trainers/embedded.Trainable (the grpo trainer), both
// found by type assertion.
package embedded

// Package server serves any policy.Policy over the OpenAI API, so that
// rollouts always speak HTTP: to vLLM on a GPU node, or to the embedded
// tiny model behind `rlpipe policy serve`, with the same client
// (policy/openai) and the same samples.
//
// # Serving a policy
//
//	srv, err := server.New(p, &server.Options{Model: "tiny", Addr: "127.0.0.1:8000"})
//	l, err := srv.Listen(ctx)      // checks the bind rule, then binds
//	fmt.Println("listening on", l.Addr())
//	err = srv.Serve(ctx, l)        // until ctx ends, then a graceful shutdown
//
// A Server is also an http.Handler, to mount under another mux or in
// httptest. Servers bind to 127.0.0.1 by default and require a token when
// bound to any other address: New and Listen refuse 0.0.0.0, :8000 or a
// public address without Options.Token, and with a token every request
// but /health must carry Authorization: Bearer TOKEN (compared in constant
// time).
//
// # The API
//
//	POST /v1/completions        prompt: a string or a list of strings
//	POST /v1/chat/completions   messages: [{"role", "content": a string}]
//	GET  /v1/models             the base model (Options.Model), then the
//	                            adapters, with vLLM's root and parent
//	POST /v1/load_lora_adapter    {"lora_name", "lora_path"} (vLLM's)
//	POST /v1/unload_lora_adapter  {"lora_name"}
//	GET  /health                200 while serving
//
// Generation requests read model (the base model, left out, or a loaded
// adapter; anything else is 404 model_not_found), n (default 1), seed
// (default random), temperature (default 1; 0 greedy), top_p, max_tokens
// (or max_completion_tokens; default: the policy's), stop (a string or a
// list), logprobs (completions: an integer ≥ 0; chat: a boolean),
// top_logprobs, return_tokens_as_token_ids and return_token_ids; other
// fields are ignored, as vLLM does, except stream and echo, which are
// refused. The policy is called once per HTTP request with one
// policy.Request per prompt, seeded with seed, so the samples are those
// the policy gives in process: sample j of prompt i is choice i·n+j.
//
// Answers carry usage (prompt tokens from the samples, completion tokens
// counted from their token ids), token_ids when return_token_ids is set,
// and with logprobs each sampled token as "token_id:N" with its
// log-probability, written as the float64 of the policy's float32 so that
// the client reads back the same bits. Alternatives (top_logprobs) are not
// computed. -Inf and NaN, which JSON cannot carry, are sent as -9999, as
// vLLM does. Text is JSON, so invalid UTF-8 in a sample's text arrives as
// U+FFFD; token ids are exact.
//
// # Errors
//
// Errors are OpenAI's {"error": {"message", "type", "param", "code"}}:
// 400 for a malformed body (the byte offset of a JSON syntax error, the
// field of a value of the wrong type), n < 1, a negative temperature,
// top_p outside (0, 1] or more than Options.MaxSamples samples; 401 for a
// missing or wrong token; 404 for an unknown model or route; 405 for a
// wrong method; 413 for a body past Options.MaxBodyBytes. Samples with a
// non-OK status fail their whole request: any policy.StatusInvalid sample
// gives a 400 with its Error (the client maps it back to StatusInvalid and
// does not retry), a timeout a 504, any other failure a 500 (retried). A
// policy that panics in the request's goroutine gives a 500; a panic in a
// goroutine the policy starts itself cannot be recovered here and ends the
// process, so a policy must not panic there.
package server

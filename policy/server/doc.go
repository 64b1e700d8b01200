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
//	POST /v1/completions        prompt: a string or a list of strings, or
//	                            token ids (a list, or a list of lists, as
//	                            vLLM takes them: continued as they are,
//	                            with no tokenizer; no echo)
//	POST /v1/chat/completions   messages: [{"role", "content": a string}];
//	                            role system, developer, user, assistant or
//	                            tool (another is a 400 naming its index)
//	GET  /v1/models             the base model (Options.Model), then the
//	                            adapters, with vLLM's root and parent
//	GET  /v1/models/{id}        one of them, the same object; an unknown
//	                            id is 404 model_not_found naming it
//	POST /v1/load_lora_adapter    {"lora_name", "lora_path"} (vLLM's)
//	POST /v1/unload_lora_adapter  {"lora_name"}
//	GET  /health                200 while serving
//
// Generation requests read model (the base model, left out, or a loaded
// adapter; anything else is 404 model_not_found), n (default 1), seed
// (default random), temperature (default 1; 0 greedy), top_p, max_tokens
// (or max_completion_tokens; default: the policy's), stop (a string or a
// list), logprobs (completions: k from 0 to 20; chat: a boolean),
// top_logprobs (chat: k from 0 to 20, with logprobs true), echo
// (completions), return_tokens_as_token_ids and return_token_ids, stream
// and stream_options.include_usage, and for chat tools and tool_choice
// (below). response_format may be {"type": "text"}, what the server samples
// anyway; a JSON mode or schema is refused with a 400 naming the field,
// since the server cannot enforce it. Other fields are ignored, as vLLM
// does. The policy is called once per HTTP request with one policy.Request per
// prompt, seeded with seed, so the samples are those the policy gives in
// process: sample j of prompt i is choice i·n+j.
//
// Answers carry usage (prompt tokens from the samples, completion tokens
// counted from their token ids), token_ids when return_token_ids is set
// and, as vLLM answers it then, prompt_token_ids (at the top of a chat
// answer, in each choice of a completions answer; not in streams) when the
// policy returns its prompts' tokens (the embedded model does),
// finish_reason ("stop" for the model's end or a stop string, "length" for
// max_tokens or the context) and vLLM's stop_reason (the stop string that
// ended the text; null for the model's end or a length). Logprobs come in
// OpenAI's two shapes, with what the policy computes (Sampling.TopLogprobs,
// the tiny model's exact log-softmax):
//
//	completions  logprobs: {tokens, token_logprobs, top_logprobs,
//	             text_offset}; top_logprobs[i] is {token: logprob} of the
//	             k most likely tokens, most likely first, plus the sampled
//	             token when it is not among them (up to k+1, as OpenAI
//	             documents)
//	chat         logprobs.content[i]: {token, logprob, bytes, top_logprobs:
//	             exactly k × {token, logprob, bytes}}
//
// Tokens are text when the policy spells them (policy.TokenTexter: the tiny
// model's characters, "<eos>" for its end token), and vLLM's "token_id:N"
// when the request sets return_tokens_as_token_ids, which rlpipe's client
// does, or the policy cannot spell them (text_offset is then null).
// Log-probabilities are written as the float64 of the policy's float32, so
// that a client reads back the same bits; -Inf and NaN, which JSON cannot
// carry, are sent as -9999, as vLLM does.
//
// echo (completions) puts the prompt before the text and, with logprobs,
// the prompt's tokens before the completion's, from
// Sampling.PromptLogprobs; the first prompt token has a null logprob and
// null top_logprobs, as in OpenAI's and vLLM's answers (vLLM's first is
// BOS; the tiny model's BOS is not text, and Sample.Prompt keeps the first
// character's logprob given it). A policy that returns no prompt logprobs
// answers echo with logprobs 400. Text is JSON, so invalid UTF-8 in a
// sample's text arrives as U+FFFD; token ids are exact.
//
// # Tool calls
//
// A chat request's tools (OpenAI's function entries) go to the policy in
// policy.Request.Tools, for a policy that shows them to its model; the
// tiny model has no chat template and is not shown them. tool_choice is
// "auto" (the default with tools) or "none"; "required" and a named
// function are a 400, since the server cannot force a call. With tools
// and auto, each choice's text is read with toolcall.Parse, as vLLM's
// hermes parser reads it: the calls become message.tool_calls (ids
// derived from the seed), the text before them the content (null when
// empty), and finish_reason "tool_calls"; a malformed call stays content.
// token_ids keep every sampled token. Messages may carry tool_calls and
// tool_call_id (role "tool"), which reach the policy as policy.Message
// fields. In a stream, the content comes token by token and the calls
// in the choice's last chunk, with the rest of its tokens.
//
// # Streaming
//
// With stream: true the answer is text/event-stream: data: {chunk}
// events, then data: [DONE]. A completions chunk (object
// text_completion) has choices[i].text, a chat chunk (object
// chat.completion.chunk) choices[i].delta, whose first for each choice is
// {"role": "assistant", "content": ""} and the rest {"content"}. Each chunk
// carries one token of one choice, with that token's logprobs (in the
// shape above; text_offset still counts into the whole text) and
// token_ids when asked; with echo a choice's first chunk is the prompt
// and its logprobs. Chunks of the choices interleave by index, a choice's
// last carries its finish_reason and stop_reason (null before), and with
// stream_options.include_usage every chunk has "usage": null but a last one
// with the usage and no choices. The chunks add up to the non-stream
// answer exactly. A policy that cannot spell its tokens (no
// policy.TokenTexter), or returns no token ids, streams each choice's text
// as one chunk.
//
// policy.Policy returns whole samples, so the stream is cut from them once
// the policy is done: it is there for clients that ask for it, and brings
// no token sooner. For the same reason every error of the policy comes
// before the stream starts, as a JSON error with its status (below); a
// started stream ends early only with an error event, data: {"error":
// {...}} then data: [DONE], when a chunk cannot be encoded. A client that
// goes away cancels the request's context, which ends the policy's
// Generate, and the handler stops writing and returns.
//
// # Errors
//
// Errors are OpenAI's {"error": {"message", "type", "param", "code"}}:
// 400 for a malformed body (the byte offset of a JSON syntax error, the
// field of a value of the wrong type), n < 1, a negative temperature,
// top_p outside (0, 1], logprobs or top_logprobs past 20, top_logprobs
// without logprobs, echo on chat, stream_options without stream: true or
// more than Options.MaxSamples samples;
// 401 for a missing or wrong token (the message says that rlpipe policy
// serve reads the token from RLPIPE_POLICY_TOKEN and an rlpipe client
// sends the variable its policy's key_env names); 404 for an unknown model or route; 405 for a
// wrong method; 413 for a body past Options.MaxBodyBytes. Samples with a
// non-OK status fail their whole request: any policy.StatusInvalid sample
// gives a 400 with its Error (the client maps it back to StatusInvalid and
// does not retry), a timeout a 504, any other failure a 500 (retried). A
// policy that panics in the request's goroutine gives a 500; a panic in a
// goroutine the policy starts itself cannot be recovered here and ends the
// process, so a policy must not panic there.
//
// # Tests
//
// Besides exact checks in Go, TestOpenAISDK reads a server of the tiny
// model, and one whose policy writes tool calls, with the official
// openai Python SDK (its tools, tool_calls whole and streamed, and its
// own assistant and tool messages sent back), pinned in
// scripts/sdk-requirements.txt and installed by scripts/sdk-venv.sh (which
// `make deps` runs) into a project-local venv, .venv-sdk; the test is
// skipped, saying so, without that venv.
package server

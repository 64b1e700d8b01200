// Package openai is a policy.Policy backed by servers that speak the
// OpenAI API: vLLM, SGLang, llama.cpp's server, or rlpipe's own policy
// server (policy/server), which serves any Policy, the embedded tiny model
// included.
//
// # A client
//
// New takes Options; nil means one vLLM server on 127.0.0.1:8000:
//
//	c, err := openai.New(&openai.Options{
//		Endpoints: []string{"http://10.0.0.5:8000", "http://10.0.0.6:8000"},
//		Model:     "Qwen/Qwen2.5-0.5B-Instruct", // vllm serve's model name
//		APIKey:    os.Getenv("VLLM_API_KEY"),     // "" for a server without --api-key
//	})
//	out, err := c.Generate(ctx, reqs, policy.Sampling{N: 8, Temperature: 1, MaxTokens: 512, Logprobs: true})
//
// Each policy.Request is one HTTP request: a Prompt goes to
// POST /v1/completions, Messages to POST /v1/chat/completions (Options.Chat
// sends prompts there too, as one user message). The body carries
//
//	model         Sampling.Adapter if set, else Options.Model
//	n             Sampling.N; 1 at temperature 0, the answer repeated N
//	              times (greedy samples are all alike, and vLLM refuses
//	              n > 1 when greedy)
//	seed          Request.Seed
//	temperature   always sent: 0 is greedy, and the API's default is 1
//	top_p, max_tokens, stop   when set (vLLM's max_tokens default is 16:
//	              set MaxTokens)
//	logprobs      with Sampling.Logprobs: Sampling.TopLogprobs for
//	              completions (at least 1: llama.cpp returns none for 0),
//	              true with top_logprobs Sampling.TopLogprobs for chat
//	return_tokens_as_token_ids   with logprobs (vLLM): tokens come back as
//	              "token_id:1234" and fill Sample.TokenIDs
//	return_token_ids   always (vLLM ≥ 0.10.2): choices[].token_ids fills
//	              Sample.TokenIDs even without logprobs
//	tools, tool_choice   chat, when Request.Tools and ToolChoice are set;
//	              messages carry tool_calls and tool_call_id in OpenAI's
//	              shapes (policy.Message)
//
// and the n choices, sorted by index, become the request's samples: Text
// (a chat message's content: the text before its tool calls when the
// server parsed them, vLLM with --tool-call-parser hermes or rlpipe policy
// serve, whose message.tool_calls fill Sample.ToolCalls; the token ids
// stay those sampled, calls included, though vLLM re-serializes the
// calls' arguments),
// TokenIDs, Logprobs (float32, exactly as a server computed them in
// float32; of softmax(z/T), as policy.Sample.Logprobs wants, only when
// vLLM runs with --logprobs-mode processed_logprobs, as vllmserver starts
// it: its default is log softmax(z) whatever the temperature), TopLogprobs when Sampling.TopLogprobs asks (the k most likely
// "token_id:N" alternatives of each position, most likely first),
// FinishReason, StopReason from vLLM's stop_reason when it is a string,
// PromptTokens from usage.prompt_tokens, and
// PolicyVersion Options.Model, or Options.Model+"+"+adapter. Servers that
// do not know the vLLM fields ignore them; TokenIDs then stays nil.
// Sample.Prompt holds the prompt's token ids (without logprobs) when the
// server returns them (vLLM's prompt_token_ids, with return_token_ids):
// an episode's exact token sequence is built from them (environments).
// The client does not ask for echo.
//
// # Endpoints, load and failures
//
// Requests go to the endpoint with the fewest in flight, ties taken in
// turn, at most Options.Concurrency per endpoint. A request that fails
// with a connection error, a per-attempt timeout (Options.Timeout), a 408,
// a 429, a 5xx or a malformed answer is retried (the rule of package
// retry, which the reward judges follow too, as they share package wire's
// bodies and HTTP exchange), up to Options.Retries times; the
// endpoint is passed over for Options.Cooldown, so the retry goes to
// another endpoint at once when one is healthy, and otherwise after an
// exponential backoff with seeded jitter, or the server's Retry-After.
// Retrying cannot help, so is not done, when a server answers something
// that is not JSON at all (an HTML page from some other web server: the
// error says the endpoint is not an OpenAI-compatible server), or when
// every endpoint has refused every connection (no HTTP answer) at least
// Retries+1 times over at least as long as one request's backoff waits:
// the servers are not there, and the other requests' connection errors
// fail at once instead of each waiting out its own retries, until an
// endpoint answers again.
// A request that still fails is not an error but N samples with a status,
// and an Error naming the endpoint, the HTTP status and what to do:
//
//	infra_error   the servers are down, failing or answering nonsense
//	              (a malformed body is reported with its byte offset)
//	timeout       no answer within Options.Timeout, or a 504
//	env_error     (policy.StatusInvalid) a 400, 413 or 422: the server
//	              refused the request itself, e.g. a prompt longer than the
//	              context; never retried
//
// Generate returns an error only when ctx ends, or when the servers answer
// 404 for Sampling.Adapter: the adapter is not loaded, and the error wraps
// policy.ErrAdapterNotLoaded.
//
// # LoRA adapters
//
// LoadAdapter(ctx, name, dir) posts vLLM's /v1/load_lora_adapter to every
// endpoint; afterwards Sampling.Adapter = name samples from it. dir is read
// by the servers, not by the client: on several hosts it must be on a
// shared file system or copied to the same path on each. vLLM needs
// --enable-lora, --max-lora-rank at least the adapter's rank, and
// VLLM_ALLOW_RUNTIME_LORA_UPDATING=True. A name a server already holds
// counts as loaded, so name each checkpoint anew (step-000120).
// UnloadAdapter removes one; PruneAdapters(ctx, k) unloads all but the k
// newest loaded through this client, keeping GPU memory bounded during a
// long run. Models lists what each endpoint serves.
//
// # Full weights
//
// LoadWeights(ctx, name, dir) makes the Hugging Face model directory dir
// (a full fine-tuning checkpoint) the weights every endpoint serves: vLLM
// reloads them in place through its development endpoints, POST
// /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path":
// dir}} and POST /reset_prefix_cache, which need VLLM_SERVER_DEV_MODE=1
// in the server's environment (about 0.03 s for a tiny model of seven
// shards; no restart). Sampling.Adapter = name then samples them, the
// requests naming the base model. A server holds one set of weights:
// a Generate for weights the servers do not hold waits until the calls on
// the held ones have drained and reloads them, and calls that arrive for
// the held ones meanwhile wait behind the reload. The base model (and
// adapters on it) is one more version: it is reloaded from the directory
// each server names as its base model's root in GET /v1/models (read
// before the first reload; a server that names none cannot go back, and
// such a request fails with ErrBaseReplaced). A refused reload matches
// ErrWeightsRefused and names the server's message.
//
// # Secrets
//
// Options.APIKey is sent as a bearer token and nowhere else (a 401 or 403
// names the variable Options.KeyEnv, the policy's key_env, says it came
// from): Options and
// Client print it as [redacted], text coming back from a server is scrubbed
// of it, and the body of a 401 or 403 is dropped. Endpoint URLs appear in
// errors without user info or query.
package openai

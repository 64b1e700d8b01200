// Package judge turns an LLM's opinion into a reward: it asks a model
// behind an OpenAI-compatible chat API (OpenAI, vLLM, any proxy that speaks
// POST /chat/completions) to grade a completion against a rubric, and
// parses a score out of the answer.
//
// # A judge
//
// A Config names the endpoint, the model, the rubric and the score range;
// New validates it once, and Score grades one Input at a time:
//
//	j, err := judge.New(judge.Config{
//		Name:      "correctness",
//		BaseURL:   "https://api.openai.com/v1",
//		Model:     "gpt-4o-mini",
//		APIKeyEnv: "OPENAI_API_KEY",
//		Rubric: `Question: {{.Prompt}}
//	Reference: {{.Answer}}
//	Answer: {{.Completion}}
//	Is the answer correct? Reply with "Score: 1" or "Score: 0".`,
//	}, nil)
//	res, err := j.Score(ctx, judge.Input{Prompt: q, Completion: c, Answer: ref}, tc)
//
// The rubric is a text/template over Input: {{.Prompt}}, {{.Completion}},
// {{.Answer}} and {{.Metadata.KEY}}. New renders it once, so a misspelt
// field is an error before the first request; a metadata key an input
// lacks is an ErrInput for that input.
//
// # Scores and statuses
//
// By default the score is the last "Score: N" (or "**Score:** N",
// "score = N") or JSON "score": N in the answer, else its last bare number
// within [Min, Max]; the thoughts of a reasoning model, up to </think>, are
// skipped. Config.ScorePattern replaces this with a regular expression of
// one group. An answer always gives a Result, whose Status says what
// became of it:
//
//	ok            a score within [Min, Max] (default 0..1)
//	unparseable   no score found; Reason says why, Raw shows the answer
//	out_of_range  a score was found outside [Min, Max]; Score holds it
//	refused       the model refused, or a content filter withheld the answer
//	error         no answer at all; Score also returned an error
//
// A reward stage decides what an unparseable answer is worth; the judge
// only reports it.
//
// # Failures and retries
//
// The judge speaks the API through the policy client's own wire
// (policy/openai/wire: the same request and response bodies, the same
// HTTP exchange per attempt) and retries by the rule the policy client
// follows too (policy/openai/retry). A 408, a 429, a 5xx, a request past
// Config.Timeout, a refused or broken connection, or a 2xx of JSON the
// judge cannot use is retried with exponential backoff and jitter,
// honouring the server's Retry-After; after Config.Retries the error is
// ErrUnavailable. Any other 4xx (400, 409, 413, 422, 425, …) is
// ErrRejected, and an answer the setup caused (401, 403, 404, an exhausted
// quota, a 2xx page that is not JSON at all: base_url names another
// server) is ErrSetup: both are permanent (pipeline.ErrPermanent), so the
// task fails at once. At most
// Config.Concurrency requests per Judge are in flight; Score may be called
// from many goroutines.
//
// # Memoization
//
// A judge call costs money and is not deterministic, so Score takes a
// pipeline.Memoizer: pass the task's *pipeline.TaskContext. The judgment is keyed
// by Config.Key (endpoint, model, rubric, parsing and sampling settings;
// not the name, key, timeouts, retries, concurrency or prices) and by the
// rendered messages. Its Result is recorded the moment it arrives; a
// retried task, a resumed run, or a later rescoring that meets the same
// judgment replays it with Result.Cached set and makes no request.
// Unparseable, out-of-range and refused Results are recorded like ok ones,
// and so are ErrRejected errors: asking again would get the same answer.
// ErrUnavailable is not recorded, and neither is ErrSetup, so fixing a key
// and resuming the run calls the API again. Changing the rubric, the
// model or the range is a new key: the inputs are judged afresh.
//
// # Secrets
//
// The API key is read from the environment variable Config.APIKeyEnv names
// and lives only in the Judge. It is not in Config, so not in a saved
// config; not in Config.Key, so not in the memo records; and never in a
// log line, an error or a Result: text that comes back from the server is
// scrubbed of it, and a 401 body, which may quote part of it, is dropped.
//
// # Cost
//
// Each Result carries the tokens and the cost of its request (prices per
// million tokens in Config); Judge.Usage sums them with the number of
// scores, replays, requests and retries, and the scores per status.
// Replays cost nothing and add no tokens.
package judge

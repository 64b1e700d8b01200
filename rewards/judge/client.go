package judge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/policy/openai/retry"
	"github.com/rlpipe/rlpipe/policy/openai/wire"
)

// Caps on what is read and kept of a response.
const (
	maxBody    = 8 << 20
	rawCap     = 2048 // Result.Raw
	messageCap = 300  // a server's error message in an error
)

// answer is one successful response.
type answer struct {
	content, refusal, finish string
	tokensIn, tokensOut      int
}

// attemptError is a failed request: whether another try may succeed, and
// how long the server asked to wait.
type attemptError struct {
	err        error
	retry      bool
	retryAfter time.Duration
}

// post sends one chat request with retries. It returns ErrUnavailable after
// the retries, ErrRejected or ErrSetup for a 4xx, and ctx's error when ctx
// ends.
func (j *Judge) post(ctx context.Context, req wire.ChatRequest) (answer, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return answer{}, fmt.Errorf("%w: judge %s: encode request: %v", ErrInput, j.name, err)
	}
	attempts := j.cfg.Retries + 1
	var last *attemptError
	for attempt := 1; ; attempt++ {
		ans, aerr := j.attempt(ctx, body)
		if aerr == nil {
			return ans, nil
		}
		if ctx.Err() != nil {
			return answer{}, fmt.Errorf("judge %s: POST %s: %w", j.name, j.cfg.shown, context.Cause(ctx))
		}
		if !aerr.retry {
			return answer{}, fmt.Errorf("judge %s: POST %s: %w", j.name, j.cfg.shown, aerr.err)
		}
		last = aerr
		if attempt == attempts {
			break
		}
		wait := j.wait(attempt, aerr.retryAfter)
		j.log.Debug().Str(logJudge, j.name).Int(logAttempt, attempt).Dur(logWait, wait).Str(logError, aerr.err.Error()).Msg("judge request failed; retrying")
		j.usage.retry()
		if err := j.sleep(ctx, wait); err != nil {
			return answer{}, fmt.Errorf("judge %s: POST %s: %w", j.name, j.cfg.shown, err)
		}
	}
	return answer{}, fmt.Errorf("%w: judge %s: POST %s: gave up after %d attempt(s); last: %w", ErrUnavailable, j.name, j.cfg.shown, attempts, last.err)
}

// wait is the pause before attempt+1 (retry.Backoff, as the policy
// client's): exponential from Backoff with equal jitter, or the server's
// Retry-After; both capped by MaxBackoff.
func (j *Judge) wait(attempt int, retryAfter time.Duration) time.Duration {
	return retry.Backoff(attempt, j.cfg.Backoff, j.cfg.MaxBackoff, retryAfter, func(n int64) int64 { return rand.Int64N(n + 1) })
}

// attempt sends one request, holding a concurrency slot while it is in
// flight.
func (j *Judge) attempt(ctx context.Context, body []byte) (answer, *attemptError) {
	select {
	case j.slots <- struct{}{}:
	case <-ctx.Done():
		return answer{}, &attemptError{err: context.Cause(ctx)}
	}
	defer func() { <-j.slots }()
	j.usage.request()

	r, err := wire.Send(ctx, j.client, wire.Call{Method: http.MethodPost, URL: j.cfg.endpoint, Body: body,
		APIKey: j.apiKey, Timeout: j.cfg.Timeout, MaxBody: maxBody})
	var re *wire.RequestError
	switch {
	case errors.As(err, &re):
		return answer{}, &attemptError{err: err}
	case errors.Is(err, wire.ErrTimeout):
		return answer{}, &attemptError{err: fmt.Errorf("%w after %v", errRequestTimeout, j.cfg.Timeout), retry: true}
	case err != nil:
		return answer{}, &attemptError{err: errors.New(j.redact(err.Error())), retry: true}
	}
	// What is read of an answer stops at maxBody, as it always has.
	r.Body = r.Body[:min(len(r.Body), maxBody)]
	if r.Status/100 == 2 {
		return j.decode(r)
	}
	return answer{}, j.statusError(r)
}

var errRequestTimeout = errors.New("request timed out")

// decode reads a 2xx answer. A body that is not JSON at all (an HTML
// page) is ErrSetup, not retried (retry.Body): base_url names some other
// server, and another attempt gets the same page.
func (j *Judge) decode(rep wire.Reply) (answer, *attemptError) {
	b := rep.Body
	var r wire.Response
	if err := json.Unmarshal(b, &r); err != nil {
		if d := retry.Body(b); !d.Retry {
			return answer{}, &attemptError{err: fmt.Errorf("%w: %s with %s, not JSON: %q: check base_url: the server there answers, but not as an OpenAI-compatible API (requests go to BASE_URL/chat/completions)",
				ErrSetup, rep.StatusText, rep.BodyKind(), j.redact(excerpt(strings.TrimSpace(string(b)), messageCap)))}
		}
		return answer{}, &attemptError{err: fmt.Errorf("malformed response (%v): %q", err, j.redact(excerpt(string(b), messageCap))), retry: true}
	}
	if len(r.Choices) == 0 {
		return answer{}, &attemptError{err: fmt.Errorf("response has no choices: %q", j.redact(excerpt(string(b), messageCap))), retry: true}
	}
	c := r.Choices[0]
	var a answer
	if c.FinishReason != nil {
		a.finish = *c.FinishReason
	}
	if r.Usage != nil {
		a.tokensIn, a.tokensOut = r.Usage.PromptTokens, r.Usage.CompletionTokens
	}
	if m := c.Message; m != nil && m.Content != nil {
		a.content = *m.Content
	}
	if m := c.Message; m != nil && m.Refusal != nil {
		a.refusal = *m.Refusal
	}
	return a, nil
}

// statusError classifies a non-2xx answer.
func (j *Judge) statusError(r wire.Reply) *attemptError {
	var body wire.APIError
	_ = json.Unmarshal(r.Body, &body)
	var msg, typ string
	var code any
	if e := body.Error; e != nil {
		msg, typ, code = e.Message, e.Type, e.Code
	}
	status := r.StatusText
	detail := func() string {
		msg := msg
		if msg == "" {
			msg = string(r.Body)
		}
		msg = strings.TrimSpace(j.redact(excerpt(msg, messageCap)))
		if msg == "" {
			return status
		}
		return status + ": " + msg
	}
	switch s := r.Status; {
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		// The body may quote part of the key: leave it out.
		hint := "the server needs no key? leave api_key_env empty"
		if j.keyEnv != "" {
			hint = "check the key in $" + j.keyEnv
		}
		return &attemptError{err: fmt.Errorf("%w: %s: %s", ErrSetup, status, hint)}
	case s == http.StatusNotFound:
		return &attemptError{err: fmt.Errorf("%w: %s: check base_url (requests go to BASE_URL/chat/completions) and model %q", ErrSetup, detail(), j.cfg.Model)}
	case s == http.StatusTooManyRequests && (fmt.Sprint(code) == "insufficient_quota" || typ == "insufficient_quota"):
		return &attemptError{err: fmt.Errorf("%w: %s: the account's quota is exhausted", ErrSetup, detail())}
	}
	// The rest by the rule the policy client follows too: 408, 429 and 5xx
	// are retried, any other 4xx is the input's fault.
	if d := retry.Status(r.Status, r.Header, r.Body, time.Now()); d.Retry {
		return &attemptError{err: errors.New(detail()), retry: true, retryAfter: d.After}
	}
	return &attemptError{err: fmt.Errorf("%w: %s", ErrRejected, detail())}
}

// redact removes the API key from text that came from outside (an error
// body that echoes a header, a model's output).
func (j *Judge) redact(s string) string {
	if j.apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, j.apiKey, "[redacted]")
}

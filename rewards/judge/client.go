package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/policy/openai/retry"
)

// message is one chat message of a request.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatRequest is the body of POST /chat/completions.
type chatRequest struct {
	Model       string    `json:"model"`
	Messages    []message `json:"messages"`
	Temperature float64   `json:"temperature"`
	MaxTokens   int       `json:"max_tokens,omitempty"`
	Seed        *int      `json:"seed,omitempty"`
}

// chatResponse is what the judge reads of an answer.
type chatResponse struct {
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
			Refusal *string `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// apiError is an error body: {"error": {"message": ..., "code": ...}}.
type apiError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	} `json:"error"`
}

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
func (j *Judge) post(ctx context.Context, req chatRequest) (answer, error) {
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

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
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

	actx, cancel := context.WithTimeoutCause(ctx, j.cfg.Timeout, errRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, j.cfg.endpoint, bytes.NewReader(body))
	if err != nil {
		return answer{}, &attemptError{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if j.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+j.apiKey)
	}
	resp, err := j.client.Do(req)
	if err != nil {
		return answer{}, j.transportError(actx, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return answer{}, j.transportError(actx, err)
	}
	if resp.StatusCode/100 == 2 {
		return j.decode(resp, b)
	}
	return answer{}, j.statusError(resp, b)
}

var errRequestTimeout = errors.New("request timed out")

func (j *Judge) transportError(actx context.Context, err error) *attemptError {
	if errors.Is(context.Cause(actx), errRequestTimeout) {
		return &attemptError{err: fmt.Errorf("%w after %v", errRequestTimeout, j.cfg.Timeout), retry: true}
	}
	// The caller names the endpoint; net/http's copy would show its query.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &attemptError{err: errors.New(j.redact(err.Error())), retry: true}
}

// decode reads a 2xx answer. A body that is not JSON at all (an HTML
// page) is ErrSetup, not retried (retry.Body): base_url names some other
// server, and another attempt gets the same page.
func (j *Judge) decode(resp *http.Response, b []byte) (answer, *attemptError) {
	var r chatResponse
	if err := json.Unmarshal(b, &r); err != nil {
		if d := retry.Body(b); !d.Retry {
			return answer{}, &attemptError{err: fmt.Errorf("%w: %s with %s, not JSON: %q: check base_url: the server there answers, but not as an OpenAI-compatible API (requests go to BASE_URL/chat/completions)",
				ErrSetup, statusText(resp), bodyKind(resp), j.redact(excerpt(strings.TrimSpace(string(b)), messageCap)))}
		}
		return answer{}, &attemptError{err: fmt.Errorf("malformed response (%v): %q", err, j.redact(excerpt(string(b), messageCap))), retry: true}
	}
	if len(r.Choices) == 0 {
		return answer{}, &attemptError{err: fmt.Errorf("response has no choices: %q", j.redact(excerpt(string(b), messageCap))), retry: true}
	}
	c := r.Choices[0]
	a := answer{finish: c.FinishReason, tokensIn: r.Usage.PromptTokens, tokensOut: r.Usage.CompletionTokens}
	if c.Message.Content != nil {
		a.content = *c.Message.Content
	}
	if c.Message.Refusal != nil {
		a.refusal = *c.Message.Refusal
	}
	return a, nil
}

// statusError classifies a non-2xx answer.
func (j *Judge) statusError(resp *http.Response, b []byte) *attemptError {
	var body apiError
	_ = json.Unmarshal(b, &body)
	code := fmt.Sprint(body.Error.Code)
	status := statusText(resp)
	detail := func() string {
		msg := body.Error.Message
		if msg == "" {
			msg = string(b)
		}
		msg = strings.TrimSpace(j.redact(excerpt(msg, messageCap)))
		if msg == "" {
			return status
		}
		return status + ": " + msg
	}
	switch s := resp.StatusCode; {
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		// The body may quote part of the key: leave it out.
		hint := "the server needs no key? leave api_key_env empty"
		if j.keyEnv != "" {
			hint = "check the key in $" + j.keyEnv
		}
		return &attemptError{err: fmt.Errorf("%w: %s: %s", ErrSetup, status, hint)}
	case s == http.StatusNotFound:
		return &attemptError{err: fmt.Errorf("%w: %s: check base_url (requests go to BASE_URL/chat/completions) and model %q", ErrSetup, detail(), j.cfg.Model)}
	case s == http.StatusTooManyRequests && (code == "insufficient_quota" || body.Error.Type == "insufficient_quota"):
		return &attemptError{err: fmt.Errorf("%w: %s: the account's quota is exhausted", ErrSetup, detail())}
	}
	// The rest by the rule the policy client follows too: 408, 429 and 5xx
	// are retried, any other 4xx is the input's fault.
	if d := retry.Status(resp.StatusCode, resp.Header, b, time.Now()); d.Retry {
		return &attemptError{err: errors.New(detail()), retry: true, retryAfter: d.After}
	}
	return &attemptError{err: fmt.Errorf("%w: %s", ErrRejected, detail())}
}

// statusText is resp's status line, e.g. "503 Service Unavailable".
func statusText(resp *http.Response) string {
	if resp.Status != "" {
		return resp.Status
	}
	return strconv.Itoa(resp.StatusCode)
}

// bodyKind names a body by its Content-Type for an error message.
func bodyKind(resp *http.Response) string {
	ct := resp.Header.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	if ct = strings.TrimSpace(ct); ct != "" {
		return "a " + ct + " body"
	}
	return "a body"
}

// redact removes the API key from text that came from outside (an error
// body that echoes a header, a model's output).
func (j *Judge) redact(s string) string {
	if j.apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, j.apiKey, "[redacted]")
}

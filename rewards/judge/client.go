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

// wait is the pause before attempt+1: exponential from Backoff with equal
// jitter, or the server's Retry-After; both capped by MaxBackoff.
func (j *Judge) wait(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, j.cfg.MaxBackoff)
	}
	d := j.cfg.Backoff
	for i := 1; i < attempt && d < j.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, j.cfg.MaxBackoff)
	return d/2 + rand.N(d/2+1)
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
		return j.decode(b)
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

func (j *Judge) decode(b []byte) (answer, *attemptError) {
	var r chatResponse
	if err := json.Unmarshal(b, &r); err != nil {
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
	status := resp.Status
	if status == "" {
		status = strconv.Itoa(resp.StatusCode)
	}
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
	case s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooEarly ||
		s == http.StatusTooManyRequests || s >= 500:
		return &attemptError{err: errors.New(detail()), retry: true, retryAfter: retryAfter(resp.Header)}
	default:
		return &attemptError{err: fmt.Errorf("%w: %s", ErrRejected, detail())}
	}
}

// retryAfter reads retry-after-ms (OpenAI) or Retry-After (seconds or an
// HTTP date); zero when absent.
func retryAfter(h http.Header) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// redact removes the API key from text that came from outside (an error
// body that echoes a header, a model's output).
func (j *Judge) redact(s string) string {
	if j.apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, j.apiKey, "[redacted]")
}

package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai/retry"
	"github.com/rlpipe/rlpipe/policy/openai/wire"
)

// Caps on what is read and kept of a response.
const (
	maxBody    = 256 << 20 // n=64 samples of 4k tokens with logprobs is ~25 MB
	messageCap = 300       // a server's error message in an error
)

// Kinds of failed attempts.
const (
	kindConnect   = "connect"   // no HTTP answer: refused, reset, DNS
	kindTimeout   = "timeout"   // no answer within Options.Timeout
	kindStatus    = "status"    // a non-2xx answer
	kindMalformed = "malformed" // a 2xx answer the client cannot read
)

// callError is a request that failed: on which endpoint, how, and whether
// another attempt may succeed.
type callError struct {
	endpoint   string // shown base URL
	method     string
	path       string
	kind       string
	status     int    // HTTP status; 0 without an answer
	statusText string // e.g. "503 Service Unavailable"
	msg        string // the server's message or the transport error, redacted
	timeout    time.Duration
	retry      bool
	retryAfter time.Duration
	attempts   int
	keyEnv     string // Options.KeyEnv, for a 401's advice
	hadKey     bool   // the request carried a key
	advice     string // replaces next() when set
	// foreign: the answer is not the API's JSON (an HTML page, plain
	// text): the endpoint is some other server.
	foreign bool
	// down > 0: not retried, as every endpoint has refused every
	// connection for that long (Client.refusing).
	down time.Duration
}

// describe says what failed, without the advice.
func (e *callError) describe() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %s%s: ", e.method, e.endpoint, e.path)
	switch e.kind {
	case kindTimeout:
		fmt.Fprintf(&sb, "no answer within %v", e.timeout)
	case kindStatus:
		sb.WriteString(e.statusText)
		if e.msg != "" {
			sb.WriteString(": " + e.msg)
		}
	default:
		sb.WriteString(e.msg)
	}
	return sb.String()
}

func (e *callError) Error() string {
	s := e.describe()
	if e.attempts > 1 {
		s += fmt.Sprintf(" (gave up after %d attempts)", e.attempts)
	}
	if e.down > 0 {
		s += fmt.Sprintf(" (every endpoint has refused every connection for %v: not retried until one answers)", e.down.Round(100*time.Millisecond))
	}
	return s + "; next: " + e.next()
}

// next is the step that fixes the failure.
func (e *callError) next() string {
	switch {
	case e.advice != "":
		return e.advice
	case e.kind == kindConnect:
		return fmt.Sprintf("start the server at %s (e.g. vllm serve or rlpipe policy serve), or remove it from the endpoints", e.endpoint)
	case e.kind == kindTimeout:
		return "raise the per-attempt timeout (Options.Timeout) or ask for fewer tokens"
	case e.kind == kindMalformed && e.foreign:
		return e.foreignAdvice()
	case e.kind == kindMalformed:
		return fmt.Sprintf("check that %s is an OpenAI-compatible server (vLLM, SGLang, llama.cpp, rlpipe policy serve) and see its log", e.endpoint)
	case e.status == http.StatusTooManyRequests:
		return "the server is saturated: lower Options.Concurrency or add endpoints"
	case e.status >= 500:
		return fmt.Sprintf("see the log of the server at %s", e.endpoint)
	case e.status == http.StatusUnauthorized || e.status == http.StatusForbidden:
		return e.keyAdvice()
	case e.foreign:
		return e.foreignAdvice()
	case e.status == http.StatusNotFound:
		return "compare the model name (Options.Model) with what GET /v1/models lists (Client.Models)"
	case e.invalid():
		return "the request itself was refused: shorten the prompt, lower max_tokens or fix the sampling parameters"
	}
	return "the server refused the request; see its message"
}

// foreignAdvice is the step for an endpoint that answers, but not as an
// OpenAI-compatible server does.
func (e *callError) foreignAdvice() string {
	return fmt.Sprintf("%s answers, but not with the OpenAI API's JSON: check the endpoint's host and port, and that the server there is OpenAI-compatible (vLLM, SGLang, llama.cpp, rlpipe policy serve) and serves %s", e.endpoint, e.path)
}

// keyAdvice says where the key a 401 or 403 refused comes from and what
// it must hold.
func (e *callError) keyAdvice() string {
	const token = "the server's token (RLPIPE_POLICY_TOKEN where rlpipe policy serve runs, vLLM's --api-key)"
	if !e.hadKey {
		return "the request carried no API key: name the variable that holds " + token + " in the policy's key_env and export it (in Go: Options.APIKey)"
	}
	where := "the variable the policy's key_env names"
	if e.keyEnv != "" {
		where = "$" + e.keyEnv + " (policy.key_env)"
	}
	return "check the API key: " + where + " must hold " + token + " (in Go: Options.APIKey)"
}

// invalid: the server refused this request's content (a prompt longer
// than the context): retrying cannot help.
func (e *callError) invalid() bool {
	return e.kind == kindStatus && (e.status == http.StatusBadRequest ||
		e.status == http.StatusRequestEntityTooLarge || e.status == http.StatusUnprocessableEntity)
}

// sampleStatus is the status of the samples of a request that failed so.
func (e *callError) sampleStatus() string {
	switch {
	case e.invalid():
		return policy.StatusInvalid
	case e.kind == kindTimeout || e.status == http.StatusGatewayTimeout:
		return policy.StatusTimeout
	}
	return policy.StatusInfraError
}

// cool is how long a failure like e passes the endpoint over.
func (c *Client) cool(e *callError) time.Duration {
	if e == nil {
		return -1
	}
	if !e.retry {
		return 0 // the request's fault, not the endpoint's
	}
	return max(c.opts.Cooldown, e.retryAfter)
}

// call sends one request with retries and passes a 2xx body to decode
// (nil: any 2xx is fine). With ep nil each attempt goes to the endpoint
// acquire picks; otherwise to ep. It returns a *callError, or ctx's error
// when ctx ends.
func (c *Client) call(ctx context.Context, ep *endpoint, method, path string, body []byte, decode func([]byte) error) error {
	attempts := c.opts.Retries + 1
	for attempt := 1; ; attempt++ {
		e := ep
		if e == nil {
			var err error
			if e, err = c.acquire(ctx); err != nil {
				return err
			}
		}
		ce := c.attempt(ctx, e, method, path, body, decode)
		c.answered(e, ce)
		if ep == nil {
			c.release(e, c.cool(ce))
		} else {
			c.mu.Lock()
			c.health(e, c.cool(ce))
			c.mu.Unlock()
		}
		if ce == nil {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		ce.attempts = attempt
		if !ce.retry || attempt == attempts {
			return ce
		}
		if ce.kind == kindConnect {
			if d := c.refusing(); d > 0 {
				ce.down = d
				return ce
			}
		}
		// Another healthy endpoint takes the retry at once; otherwise wait.
		wait := time.Duration(0)
		if ep != nil || !c.anyHealthy() {
			wait = c.backoff(attempt, ce.retryAfter)
		}
		c.log.Debug().Str(logEndpoint, e.shown).Int(logAttempt, attempt).Dur(logWait, wait).Str(logError, ce.describe()).Msg("request failed; retrying")
		if wait > 0 {
			if err := c.sleep(ctx, wait); err != nil {
				return err
			}
		}
	}
}

// backoff is the pause before attempt+1: exponential from Backoff with
// equal jitter, or the server's Retry-After; both capped by MaxBackoff.
func (c *Client) backoff(attempt int, retryAfter time.Duration) time.Duration {
	return retry.Backoff(attempt, c.opts.Backoff, c.opts.MaxBackoff, retryAfter, func(n int64) int64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.rng.Int64N(n + 1)
	})
}

// attempt sends one request to e.
func (c *Client) attempt(ctx context.Context, e *endpoint, method, path string, body []byte, decode func([]byte) error) *callError {
	ce := &callError{endpoint: e.shown, method: method, path: path, timeout: c.opts.Timeout,
		keyEnv: c.opts.KeyEnv, hadKey: c.opts.APIKey != ""}
	r, err := wire.Send(ctx, c.http, wire.Call{Method: method, URL: e.base + path, Body: body,
		APIKey: c.opts.APIKey, Timeout: c.opts.Timeout, MaxBody: maxBody})
	var re *wire.RequestError
	switch {
	case errors.As(err, &re):
		ce.kind, ce.msg = kindConnect, c.redact(err.Error())
		return ce
	case errors.Is(err, wire.ErrTimeout):
		ce.kind, ce.retry = kindTimeout, true
		return ce
	case err != nil:
		ce.kind, ce.retry, ce.msg = kindConnect, true, c.redact(err.Error())
		return ce
	}
	if r.Status/100 == 2 {
		if len(r.Body) > maxBody {
			ce.kind, ce.retry, ce.msg = kindMalformed, true, fmt.Sprintf("response larger than %d MiB", maxBody>>20)
			return ce
		}
		if decode == nil {
			return nil
		}
		if err := decode(r.Body); err != nil {
			d := retry.Body(r.Body)
			ce.kind, ce.retry, ce.foreign = kindMalformed, d.Retry, d.NotJSON
			if d.NotJSON {
				// Another attempt gets the same page.
				ce.msg = fmt.Sprintf("%s with an empty body, not JSON", r.StatusText)
				if t := strings.TrimSpace(c.redact(excerpt(string(r.Body), messageCap))); t != "" {
					ce.msg = fmt.Sprintf("%s with %s, not JSON: %s", r.StatusText, r.BodyKind(), t)
				}
				return ce
			}
			ce.msg = c.redact(err.Error())
			return ce
		}
		return nil
	}
	return c.statusError(ce, r)
}

// statusError classifies a non-2xx answer by the shared rule
// (retry.Status: 408, 429 and 5xx may succeed on another attempt; other
// 4xx never do), except a refused adapter load.
func (c *Client) statusError(ce *callError, r wire.Reply) *callError {
	ce.kind, ce.status, ce.statusText = kindStatus, r.Status, r.StatusText
	var body wire.APIError
	msg := ""
	if json.Unmarshal(r.Body, &body) == nil {
		msg, _ = body.Text()
	}
	d := retry.Status(r.Status, r.Header, r.Body, c.now())
	ce.foreign = d.NotJSON
	if msg == "" {
		msg = string(r.Body)
	}
	if s := r.Status; s != http.StatusUnauthorized && s != http.StatusForbidden {
		// A 401 body may quote part of the key: leave it out.
		ce.msg = strings.TrimSpace(c.redact(excerpt(msg, messageCap)))
	}
	if d.Retry && !(ce.path == pathLoad && refusedAdapter(ce)) && !refusedWeights(ce) {
		// (vLLM answers 500 for an adapter it cannot take, its rank or
		// its files, and for weights it cannot reload: another attempt
		// gets the same answer.)
		ce.retry, ce.retryAfter = true, d.After
	}
	return ce
}

// redact removes the API key from text that came from outside.
func (c *Client) redact(s string) string {
	if c.opts.APIKey == "" {
		return s
	}
	return strings.ReplaceAll(s, c.opts.APIKey, redacted)
}

// excerpt caps s at about n bytes, on a rune boundary.
func excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

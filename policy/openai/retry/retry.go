// Package retry is the one retry policy of rlpipe's two OpenAI-compatible
// clients, the policy client (policy/openai) and the reward judges
// (rewards/judge): which answers another attempt may fix, how long the
// server asked to wait, the backoff between attempts (Backoff, Sleep) and
// the default knobs (Defaults). The bodies and the HTTP exchange both
// clients send are package wire's.
//
// The rule:
//
//   - No HTTP answer (refused or reset connection, DNS, an attempt past its
//     timeout): retry. The caller bounds it (Retries; the policy client also
//     stops when every endpoint has refused every connection for a while).
//   - 408, 429 and every 5xx: retry, after the server's Retry-After-Ms or
//     Retry-After when it sent one.
//   - Any other non-2xx (400, 401, 403, 404, 409, 422, …): never; the
//     request or the setup is at fault and another attempt gets the same
//     answer.
//   - A 2xx whose body is not JSON at all (an HTML page, plain text, empty):
//     never; the endpoint is some other server and will send the same page.
//   - A 2xx of JSON the client cannot use (cut short, no choices): retry.
//
// A client may refuse more on top (the judge: a 429 for an exhausted quota;
// the policy client: a 500 for an adapter vLLM cannot load), never less.
package retry

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"time"
)

// Decision is what an answer means for the next attempt.
type Decision struct {
	// Retry: another attempt may succeed.
	Retry bool
	// After is the wait the server asked for (Retry-After-Ms or
	// Retry-After); zero when it named none or Retry is false.
	After time.Duration
	// NotJSON: the body is not JSON at all (an HTML page, plain text,
	// empty), the sign of an endpoint that is not the API.
	NotJSON bool
}

// Status classifies a non-2xx answer with headers h and body b; now
// resolves a Retry-After given as an HTTP date.
func Status(code int, h http.Header, b []byte, now time.Time) Decision {
	d := Decision{NotJSON: NotJSON(b)}
	if Retryable(code) {
		d.Retry = true
		d.After = After(h, now)
	}
	return d
}

// Body classifies a 2xx answer whose body b the client could not decode.
func Body(b []byte) Decision {
	if NotJSON(b) {
		return Decision{NotJSON: true}
	}
	return Decision{Retry: true}
}

// Retryable reports a status another attempt may fix: 408, 429 and 5xx.
func Retryable(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

// NotJSON reports a body that is not JSON at all (an HTML page, plain
// text, nothing), as opposed to JSON the client cannot read.
func NotJSON(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) == 0 || (b[0] != '{' && b[0] != '[')
}

// After reads Retry-After-Ms (OpenAI's, in milliseconds) or Retry-After
// (seconds, or an HTTP date resolved against now); zero when absent,
// unreadable, or not in the future.
func After(h http.Header, now time.Time) time.Duration {
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
		return max(time.Duration(s*float64(time.Second)), 0)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// Defaults of both clients' retry knobs.
const (
	DefaultRetries    = 4
	DefaultBackoff    = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
)

// Defaults fills a client's zero retry knobs: retries 0 is
// DefaultRetries and a negative count none; a zero backoff is
// DefaultBackoff and a zero max backoff DefaultMaxBackoff, or backoff
// when that is larger.
func Defaults(retries int, backoff, maxBackoff time.Duration) (int, time.Duration, time.Duration) {
	switch {
	case retries == 0:
		retries = DefaultRetries
	case retries < 0:
		retries = 0
	}
	if backoff == 0 {
		backoff = DefaultBackoff
	}
	if maxBackoff == 0 {
		maxBackoff = max(DefaultMaxBackoff, backoff)
	}
	return retries, backoff, maxBackoff
}

// Backoff is the pause before attempt+1 (attempt counts from 1): the
// server's wait when it named one, else base doubled per earlier attempt
// with equal jitter (a value in [d/2, d]); both capped by maxWait. jitter
// returns a value in [0, n] (e.g. rand.Int64N(n+1)).
func Backoff(attempt int, base, maxWait, after time.Duration, jitter func(n int64) int64) time.Duration {
	if after > 0 {
		return min(after, maxWait)
	}
	d := base
	for i := 1; i < attempt && d < maxWait; i++ {
		d *= 2
	}
	d = min(d, maxWait)
	return d/2 + time.Duration(jitter(int64(d/2)))
}

// Sleep is the pause between attempts: it waits d, or returns ctx's cause
// as soon as ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

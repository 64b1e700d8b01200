package openai

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/policy/openai/retry"
)

// Defaults of the knobs a zero Options leaves unset.
const (
	DefaultEndpoint    = "http://127.0.0.1:8000" // vllm serve's address
	DefaultConcurrency = 8                       // requests in flight per endpoint
	DefaultTimeout     = 5 * time.Minute
	DefaultRetries     = retry.DefaultRetries
	DefaultBackoff     = retry.DefaultBackoff
	DefaultMaxBackoff  = retry.DefaultMaxBackoff
	DefaultCooldown    = 10 * time.Second
)

// Options configure a Client. A nil *Options, or a zero field, means the
// default.
type Options struct {
	// Endpoints are the servers' base URLs, e.g. http://10.0.0.5:8000; a
	// trailing /v1 is accepted and dropped. Requests are spread over them
	// (default: DefaultEndpoint). All must serve the same base model.
	Endpoints []string
	// Model is the base model's name as the servers know it (vllm serve's
	// --served-model-name). Empty: the field is left out and each server
	// uses its default model.
	Model string
	// Chat sends plain prompts to /v1/chat/completions as one user message,
	// for servers that only offer chat. Requests with Messages always go to
	// /v1/chat/completions, requests with a Prompt otherwise to
	// /v1/completions.
	Chat bool
	// APIKey is sent as a bearer token. The caller reads it from the
	// environment; the client never logs it and scrubs it from errors and
	// from String.
	APIKey string
	// KeyEnv names the variable APIKey was read from, for the advice of a
	// 401 (the openai backend sets it from the policy's key_env).
	KeyEnv string
	// Concurrency caps the requests in flight per endpoint (default 8).
	Concurrency int
	// Timeout bounds one attempt of one request (default 5m).
	Timeout time.Duration
	// Retries is how many times a failed request is sent again after a
	// connection error, a timeout, a 429, a 5xx or a malformed response
	// (0: 4; negative: none). A 4xx other than 429 is never retried. Another
	// endpoint takes a retry at once when one is healthy; otherwise the wait
	// grows from Backoff (default 500ms) by doubling, with jitter, up to
	// MaxBackoff (default 30s), and a server's Retry-After replaces it.
	Retries    int
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Cooldown is how long an endpoint that failed is passed over while
	// others are healthy (default 10s; a 429's Retry-After when longer).
	Cooldown time.Duration
	// Seed seeds the jitter of the backoff, so a test replays the same
	// waits.
	Seed uint64
	// HTTPClient sends the requests (default: a client whose idle pool
	// fits Concurrency). Timeout bounds each attempt whatever its own
	// timeout.
	HTTPClient *http.Client
	// Logger receives Debug lines per retry and Info lines per adapter
	// (default: none).
	Logger zerolog.Logger
}

// String shows the options with the API key redacted.
func (o Options) String() string {
	key := ""
	if o.APIKey != "" {
		key = redacted
	}
	eps := make([]string, len(o.Endpoints))
	for i, e := range o.Endpoints {
		eps[i] = shownURL(e)
	}
	return fmt.Sprintf("openai.Options{Endpoints: %q, Model: %q, Chat: %t, APIKey: %q, Concurrency: %d, Timeout: %v, Retries: %d, Backoff: %v, MaxBackoff: %v, Cooldown: %v, Seed: %d}",
		eps, o.Model, o.Chat, key, o.Concurrency, o.Timeout, o.Retries, o.Backoff, o.MaxBackoff, o.Cooldown, o.Seed)
}

// GoString keeps the key out of %#v too.
func (o Options) GoString() string { return o.String() }

const redacted = "[redacted]"

func (o Options) withDefaults() Options {
	if len(o.Endpoints) == 0 {
		o.Endpoints = []string{DefaultEndpoint}
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	o.Retries, o.Backoff, o.MaxBackoff = retry.Defaults(o.Retries, o.Backoff, o.MaxBackoff)
	if o.Cooldown == 0 {
		o.Cooldown = DefaultCooldown
	}
	return o
}

func (o Options) validate() error {
	if o.Concurrency < 0 || o.Timeout < 0 || o.Backoff < 0 || o.MaxBackoff < 0 || o.Cooldown < 0 {
		return fmt.Errorf("openai: concurrency, timeout, backoff, max backoff and cooldown cannot be negative")
	}
	seen := map[string]bool{}
	for _, e := range o.Endpoints {
		base, err := baseURL(e)
		if err != nil {
			return err
		}
		if seen[base] {
			return fmt.Errorf("openai: endpoint %s is listed twice", shownURL(e))
		}
		seen[base] = true
	}
	return nil
}

// baseURL checks an endpoint and returns it without a trailing / or /v1.
func baseURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("openai: endpoint %q is not an http(s) base URL such as http://127.0.0.1:8000", shownURL(s))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("openai: endpoint %s: drop the query and fragment; paths such as /v1/completions are appended to it", shownURL(s))
	}
	p := strings.TrimRight(u.Path, "/")
	p = strings.TrimSuffix(p, "/v1")
	u.Path, u.RawPath = p, ""
	return u.String(), nil
}

// shownURL is an endpoint as logs and errors show it: without user info,
// query or fragment, which may carry a credential.
func shownURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if strings.ContainsAny(s, "@?#") {
			return "(unparseable URL)"
		}
		return s
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return strings.TrimRight(u.String(), "/")
}

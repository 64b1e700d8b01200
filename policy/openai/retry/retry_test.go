package retry_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/policy/openai/retry"
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestStatus(t *testing.T) {
	apiErr := []byte(`{"error":{"message":"no"}}`)
	html := []byte("<html><body>Bad Gateway</body></html>")
	for _, tc := range []struct {
		name   string
		code   int
		header http.Header
		body   []byte
		want   retry.Decision
	}{
		{"400 is the request's fault", 400, nil, apiErr, retry.Decision{}},
		{"401 is the key's fault", 401, nil, apiErr, retry.Decision{}},
		{"403 is the key's fault", 403, nil, apiErr, retry.Decision{}},
		{"404 is the url's or model's fault", 404, nil, apiErr, retry.Decision{}},
		{"409 is not retried", 409, nil, apiErr, retry.Decision{}},
		{"422 is the request's fault", 422, nil, apiErr, retry.Decision{}},
		{"425 is not retried", 425, nil, apiErr, retry.Decision{}},
		{"408 is retried", 408, nil, apiErr, retry.Decision{Retry: true}},
		{"429 without a wait", 429, nil, apiErr, retry.Decision{Retry: true}},
		{"429 with Retry-After seconds", 429, http.Header{"Retry-After": {"3"}}, apiErr, retry.Decision{Retry: true, After: 3 * time.Second}},
		{"429 with Retry-After-Ms first", 429, http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"3"}}, apiErr, retry.Decision{Retry: true, After: 250 * time.Millisecond}},
		{"429 with Retry-After a date", 429, http.Header{"Retry-After": {now.Add(7 * time.Second).Format(http.TimeFormat)}}, apiErr, retry.Decision{Retry: true, After: 7 * time.Second}},
		{"429 with Retry-After a past date", 429, http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, apiErr, retry.Decision{Retry: true}},
		{"429 with a negative Retry-After", 429, http.Header{"Retry-After": {"-5"}}, apiErr, retry.Decision{Retry: true}},
		{"429 with an unreadable Retry-After", 429, http.Header{"Retry-After": {"soon"}}, apiErr, retry.Decision{Retry: true}},
		{"500 is retried", 500, nil, apiErr, retry.Decision{Retry: true}},
		{"502 as an HTML page is retried", 502, nil, html, retry.Decision{Retry: true, NotJSON: true}},
		{"503 with Retry-After", 503, http.Header{"Retry-After": {"1.5"}}, nil, retry.Decision{Retry: true, After: 1500 * time.Millisecond, NotJSON: true}},
		{"a 4xx's Retry-After is ignored", 400, http.Header{"Retry-After": {"3"}}, apiErr, retry.Decision{}},
		{"404 as an HTML page", 404, nil, html, retry.Decision{NotJSON: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = http.Header{}
			}
			if got := retry.Status(tc.code, h, tc.body, now); got != tc.want {
				t.Fatalf("Status(%d) = %+v, want %+v", tc.code, got, tc.want)
			}
		})
	}
}

func TestBody(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want retry.Decision
	}{
		{"an HTML page is another server's: not retried", "\n <!doctype html><p>hi</p>", retry.Decision{NotJSON: true}},
		{"plain text is not retried", "ok", retry.Decision{NotJSON: true}},
		{"an empty body is not retried", "  ", retry.Decision{NotJSON: true}},
		{"JSON cut short is retried", `{"choices":[`, retry.Decision{Retry: true}},
		{"a JSON array is retried", `[1]`, retry.Decision{Retry: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retry.Body([]byte(tc.body)); got != tc.want {
				t.Fatalf("Body(%q) = %+v, want %+v", tc.body, got, tc.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	least := func(int64) int64 { return 0 }
	most := func(n int64) int64 { return n }
	for _, tc := range []struct {
		name             string
		attempt          int
		base, max, after time.Duration
		jitter           func(int64) int64
		want             time.Duration
	}{
		{"first wait, least jitter", 1, 100 * time.Millisecond, time.Second, 0, least, 50 * time.Millisecond},
		{"first wait, most jitter", 1, 100 * time.Millisecond, time.Second, 0, most, 100 * time.Millisecond},
		{"third wait doubles twice", 3, 100 * time.Millisecond, time.Second, 0, most, 400 * time.Millisecond},
		{"capped by max", 10, 100 * time.Millisecond, time.Second, 0, most, time.Second},
		{"capped by max, least jitter", 10, 100 * time.Millisecond, time.Second, 0, least, 500 * time.Millisecond},
		{"the server's wait replaces it", 3, 100 * time.Millisecond, time.Second, 250 * time.Millisecond, most, 250 * time.Millisecond},
		{"the server's wait is capped", 1, 100 * time.Millisecond, time.Second, time.Minute, most, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retry.Backoff(tc.attempt, tc.base, tc.max, tc.after, tc.jitter); got != tc.want {
				t.Fatalf("Backoff = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSleep: a wait ends early with the context's cause, and a zero wait
// returns at once without error.
func TestSleep(t *testing.T) {
	if err := retry.Sleep(context.Background(), 0); err != nil {
		t.Errorf("Sleep(0) = %v, want nil", err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("the run was stopped"))
	if err := retry.Sleep(ctx, time.Hour); err == nil || err.Error() != "the run was stopped" {
		t.Errorf("Sleep on an ended context = %v, want its cause", err)
	}
}

func TestDefaults(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		retries                  int
		backoff, maxBackoff      time.Duration
		wantRetries              int
		wantBackoff, wantMaxWait time.Duration
	}{
		{name: "all zero", wantRetries: 4, wantBackoff: 500 * time.Millisecond, wantMaxWait: 30 * time.Second},
		{name: "negative retries mean none", retries: -1, wantRetries: 0, wantBackoff: 500 * time.Millisecond, wantMaxWait: 30 * time.Second},
		{name: "a backoff above the default max raises it", retries: 2, backoff: time.Minute, wantRetries: 2, wantBackoff: time.Minute, wantMaxWait: time.Minute},
		{name: "set knobs stay", retries: 7, backoff: time.Second, maxBackoff: 5 * time.Second, wantRetries: 7, wantBackoff: time.Second, wantMaxWait: 5 * time.Second},
	} {
		r, b, m := retry.Defaults(tc.retries, tc.backoff, tc.maxBackoff)
		if r != tc.wantRetries || b != tc.wantBackoff || m != tc.wantMaxWait {
			t.Errorf("%s: Defaults(%d, %v, %v) = %d, %v, %v; want %d, %v, %v", tc.name, tc.retries, tc.backoff, tc.maxBackoff, r, b, m, tc.wantRetries, tc.wantBackoff, tc.wantMaxWait)
		}
	}
}

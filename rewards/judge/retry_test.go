package judge_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/rewards/judge"
)

// TestRetryPolicy runs the judge against a hand-written loopback server
// that always answers one way, and checks the shared retry rule
// (policy/openai/retry): how many attempts each answer gets, the waits,
// and the error the caller sees.
func TestRetryPolicy(t *testing.T) {
	const retries = 2 // three attempts at most
	for _, tc := range []struct {
		name     string
		status   int
		header   map[string]string
		body     string
		refused  bool // no server: the connection is refused
		attempts int
		waits    string
		is       error // the error's class
		perm     bool  // matches pipeline.ErrPermanent
		msg      string
	}{
		{name: "429 with Retry-After is retried after the server's wait",
			status: 429, header: map[string]string{"Retry-After": "2"},
			body:     `{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}`,
			attempts: 3, waits: "[2s 2s]", is: judge.ErrUnavailable,
			msg: "judge API unavailable: judge t: POST URL/v1/chat/completions: gave up after 3 attempt(s); last: 429 Too Many Requests: Rate limit reached"},
		{name: "500 is retried",
			status: 500, body: "upstream exploded",
			attempts: 3, is: judge.ErrUnavailable,
			msg: "judge API unavailable: judge t: POST URL/v1/chat/completions: gave up after 3 attempt(s); last: 500 Internal Server Error: upstream exploded"},
		{name: "503 is retried",
			status: 503, header: map[string]string{"Content-Type": "text/html"}, body: "<html>maintenance</html>",
			attempts: 3, is: judge.ErrUnavailable,
			msg: "judge API unavailable: judge t: POST URL/v1/chat/completions: gave up after 3 attempt(s); last: 503 Service Unavailable: <html>maintenance</html>"},
		{name: "400 is the input's fault: one attempt",
			status: 400, body: `{"error":{"message":"prompt too long"}}`,
			attempts: 1, waits: "[]", is: judge.ErrRejected, perm: true,
			msg: "judge t: POST URL/v1/chat/completions: judge API rejected the request: 400 Bad Request: prompt too long"},
		{name: "401 is the setup's fault: one attempt, the body left out",
			status: 401, body: `{"error":{"message":"bad key sk-test-0123"}}`,
			attempts: 1, waits: "[]", is: judge.ErrSetup, perm: true,
			msg: "judge t: POST URL/v1/chat/completions: judge API refused the judge setup: 401 Unauthorized: check the key in $" + testKeyEnv},
		{name: "an HTML 200 page is another server's: one attempt",
			status: 200, header: map[string]string{"Content-Type": "text/html; charset=utf-8"}, body: "<!doctype html><title>router login</title>\n",
			attempts: 1, waits: "[]", is: judge.ErrSetup, perm: true,
			msg: `judge t: POST URL/v1/chat/completions: judge API refused the judge setup: 200 OK with a text/html body, not JSON: "<!doctype html><title>router login</title>": check base_url: the server there answers, but not as an OpenAI-compatible API (requests go to BASE_URL/chat/completions)`},
		{name: "a refused connection is retried, then given up",
			refused: true, attempts: 3, is: judge.ErrUnavailable,
			msg: "judge API unavailable: judge t: POST URL/v1/chat/completions: gave up after 3 attempt(s); last: dial tcp ADDR: connect: connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			var base, addr string
			if tc.refused {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				addr = ln.Addr().String()
				ln.Close() // nothing listens there now
				base = "http://" + addr + "/v1"
			} else {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					n.Add(1)
					for k, v := range tc.header {
						w.Header().Set(k, v)
					}
					if w.Header().Get("Content-Type") == "" {
						w.Header().Set("Content-Type", "application/json")
					}
					w.WriteHeader(tc.status)
					fmt.Fprint(w, tc.body)
				}))
				t.Cleanup(srv.Close)
				base = srv.URL + "/v1"
			}
			cfg := judge.Config{Name: "t", BaseURL: base, Model: "m", APIKeyEnv: testKeyEnv, Rubric: rubric,
				Timeout: 5 * time.Second, Retries: retries, Backoff: time.Millisecond, MaxBackoff: 10 * time.Second}
			j := newJudge(t, cfg, nil)
			waits := recordWaits(j)
			// With a memo, as a reward stage scores (it makes ErrSetup permanent).
			res, err := j.Score(context.Background(), in, &memoTable{})
			if err == nil {
				t.Fatalf("score = %+v, want an error", res)
			}
			got := j.Usage().Requests
			if !tc.refused && int(n.Load()) != got {
				t.Fatalf("the server saw %d requests, the judge counted %d", n.Load(), got)
			}
			if got != tc.attempts {
				t.Fatalf("attempts = %d, want %d (%v)", got, tc.attempts, err)
			}
			if tc.waits != "" && fmt.Sprint(*waits) != tc.waits {
				t.Fatalf("waits = %v, want %s", *waits, tc.waits)
			}
			if len(*waits) != tc.attempts-1 {
				t.Fatalf("waits = %v, want %d", *waits, tc.attempts-1)
			}
			if !errors.Is(err, tc.is) || errors.Is(err, pipeline.ErrPermanent) != tc.perm {
				t.Fatalf("err = %v: want %v, permanent %v", err, tc.is, tc.perm)
			}
			msg := strings.ReplaceAll(err.Error(), base, "URL/v1")
			if addr != "" {
				msg = strings.ReplaceAll(msg, addr, "ADDR")
			}
			if msg != tc.msg {
				t.Fatalf("error:\n got %s\nwant %s", msg, tc.msg)
			}
			if strings.Contains(err.Error(), testKey[:12]) {
				t.Fatalf("error %q shows the key", err)
			}
		})
	}
}

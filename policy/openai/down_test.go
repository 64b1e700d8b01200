package openai_test

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
)

// totalWait sums waits as the client's message rounds them.
func totalWait(w []time.Duration) string {
	var d time.Duration
	for _, x := range w {
		d += x
	}
	return d.Round(100 * time.Millisecond).String()
}

// A server that is not there costs one request's retries, not every
// request's: once the endpoint has refused as many connections as one
// request makes, over as long as its backoff waits, the connection
// errors of other requests are not retried.
func TestDeadEndpointFailsFast(t *testing.T) {
	down := refusedURL(t)
	c, waits := newClient(t, openai.Options{Retries: 3, Backoff: time.Second, MaxBackoff: 4 * time.Second}, down)
	openai.FakeTime(c)

	out := generate(t, c, reqs(1), policy.Sampling{N: 2})
	wantStatus(t, out, policy.StatusInfraError, "POST "+down+"/v1/completions: dial tcp ", "connection refused (gave up after 4 attempts); next: start the server at "+down)
	first := waits()
	if len(first) != 3 {
		t.Fatalf("the first request waited %v, want 3 backoff waits", first)
	}

	out = generate(t, c, reqs(5), policy.Sampling{N: 2})
	wantStatus(t, out, policy.StatusInfraError, "connection refused (every endpoint has refused every connection for "+totalWait(first)+
		": not retried until one answers); next: start the server at "+down)
	if w := waits(); len(w) != 3 {
		t.Errorf("waits %v after the endpoint was down: want none beyond the first request's 3", w)
	}
	if got := c.Stats()[0].Requests; got != 4+5 {
		t.Errorf("%d connection attempts, want 4 for the first request and 1 for each of the 5 others", got)
	}
}

// An endpoint that answers again ends the fast failures, and a later
// outage starts counting afresh.
func TestRefusingEndpointRecovers(t *testing.T) {
	var closing atomic.Bool
	f := newFake(t, func(k int, r seen, w http.ResponseWriter) bool {
		if !closing.Load() {
			return false
		}
		// Read the request, answer nothing: a connection error.
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return true
	})
	c, _ := newClient(t, openai.Options{Retries: 2, Backoff: time.Second, MaxBackoff: 4 * time.Second}, f.URL)
	openai.FakeTime(c)

	steps := []struct {
		name     string
		closing  bool
		requests int
		status   string
		sent     int // generation requests the server saw in this step
	}{
		{"outage: the first request retries", true, 1, policy.StatusInfraError, 3},
		{"down: one attempt each", true, 4, policy.StatusInfraError, 4},
		{"back: served at once", false, 4, policy.StatusOK, 4},
		{"a new outage: retried again", true, 1, policy.StatusInfraError, 3},
	}
	for _, s := range steps {
		closing.Store(s.closing)
		before := f.Generations()
		out := generate(t, c, reqs(s.requests), policy.Sampling{N: 1})
		wantStatus(t, out, s.status)
		if got := f.Generations() - before; got != s.sent {
			t.Errorf("%s: the server saw %d requests, want %d", s.name, got, s.sent)
		}
	}
}

// An endpoint that is some other web server (a page for every path) is
// told apart from an OpenAI-compatible one: its answers are not retried,
// and the error says what answered and what to check.
func TestForeignServer(t *testing.T) {
	const page = "<html><body><h1>404 Not Found</h1></body></html>"
	cases := []struct {
		name     string
		status   int
		body     string
		sampling policy.Sampling
		want     string // after "POST <url>/v1/completions: "
	}{
		{"a 404 page", http.StatusNotFound, page, policy.Sampling{N: 2}, "404 Not Found: " + page},
		{"a 404 page for an adapter", http.StatusNotFound, page, policy.Sampling{N: 2, Adapter: "step-3"}, "404 Not Found: " + page},
		{"a 200 page", http.StatusOK, page, policy.Sampling{N: 2}, "200 OK with a text/html body, not JSON: " + page},
		{"an empty 200", http.StatusOK, "", policy.Sampling{N: 2}, "200 OK with an empty body, not JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(k int, r seen, w http.ResponseWriter) bool {
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
				return true
			})
			c, waits := newClient(t, openai.Options{Retries: 3}, f.URL)
			out := generate(t, c, reqs(2), tc.sampling)
			wantStatus(t, out, policy.StatusInfraError, "POST "+f.URL+"/v1/completions: "+tc.want+"; next: "+f.URL+
				" answers, but not with the OpenAI API's JSON: check the endpoint's host and port, and that the server there is OpenAI-compatible (vLLM, SGLang, llama.cpp, rlpipe policy serve) and serves /v1/completions")
			if got := f.Generations(); got != 2 {
				t.Errorf("the server saw %d requests, want 2: one each, no retry", got)
			}
			if w := waits(); len(w) != 0 {
				t.Errorf("waited %v", w)
			}
		})
	}
}

// vLLM's own 404 (JSON) for an adapter it does not hold still says so.
func TestJSON404IsNotForeign(t *testing.T) {
	f := newFake(t, func(k int, r seen, w http.ResponseWriter) bool {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":{"message":"The model `+"`base`"+` does not exist.","type":"NotFoundError","code":404}}`)
		return true
	})
	c, _ := newClient(t, openai.Options{}, f.URL)
	out := generate(t, c, reqs(1), policy.Sampling{N: 1})
	wantStatus(t, out, policy.StatusInfraError, "404 Not Found: The model `base` does not exist.; next: compare the model name")
	if _, err := c.Generate(t.Context(), reqs(1), policy.Sampling{Adapter: "step-3"}); !errors.Is(err, policy.ErrAdapterNotLoaded) {
		t.Errorf("adapter: %v, want ErrAdapterNotLoaded", err)
	}
}

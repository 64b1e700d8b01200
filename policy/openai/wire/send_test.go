package wire_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/policy/openai/wire"
)

// seen is what the loopback server received.
type seen struct {
	method, path, query, contentType, accept, auth, body string
}

// server answers every request with status, contentType and body, and
// records what it received; hang makes it wait for the client to give up.
func server(t *testing.T, status int, contentType, body string, hang bool) (*httptest.Server, *seen) {
	t.Helper()
	var got seen
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("Accept"), r.Header.Get("Authorization"), string(b)}
		if hang {
			select {
			case <-r.Context().Done():
			case <-done:
			}
			return
		}
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv, &got
}

func TestSend(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name        string
		status      int
		contentType string
		answer      string
		call        wire.Call
		want        wire.Reply
		wantKind    string
		wantSeen    seen
	}{
		{name: "a JSON post with a key", status: 200, contentType: "application/json", answer: `{"choices":[]}`,
			call:     wire.Call{Method: http.MethodPost, URL: "/v1/chat/completions?api-version=1", Body: []byte(`{"model":"m"}`), APIKey: "sk-1", MaxBody: 1 << 10},
			want:     wire.Reply{Status: 200, StatusText: "200 OK", ContentType: "application/json", Body: []byte(`{"choices":[]}`)},
			wantKind: "a application/json body",
			wantSeen: seen{"POST", "/v1/chat/completions", "api-version=1", "application/json", "application/json", "Bearer sk-1", `{"model":"m"}`}},
		{name: "a get without key or body", status: 200, contentType: "application/json", answer: `{"data":[]}`,
			call:     wire.Call{Method: http.MethodGet, URL: "/v1/models", MaxBody: 1 << 10},
			want:     wire.Reply{Status: 200, StatusText: "200 OK", ContentType: "application/json", Body: []byte(`{"data":[]}`)},
			wantKind: "a application/json body",
			wantSeen: seen{method: "GET", path: "/v1/models", accept: "application/json"}},
		{name: "an error status is a reply", status: 503, contentType: "text/html; charset=utf-8", answer: "<html>busy</html>",
			call:     wire.Call{Method: http.MethodPost, URL: "/v1/completions", Body: []byte(`{}`), MaxBody: 1 << 10},
			want:     wire.Reply{Status: 503, StatusText: "503 Service Unavailable", ContentType: "text/html; charset=utf-8", Body: []byte("<html>busy</html>")},
			wantKind: "a text/html body",
			wantSeen: seen{"POST", "/v1/completions", "", "application/json", "application/json", "", `{}`}},
		{name: "the body is read to MaxBody+1", status: 200, answer: "0123456789",
			call:     wire.Call{Method: http.MethodPost, URL: "/v1/completions", Body: []byte(`{}`), MaxBody: 4},
			want:     wire.Reply{Status: 200, StatusText: "200 OK", ContentType: "text/plain; charset=utf-8", Body: []byte("01234")},
			wantKind: "a text/plain body",
			wantSeen: seen{"POST", "/v1/completions", "", "application/json", "application/json", "", `{}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, got := server(t, tc.status, tc.contentType, tc.answer, false)
			c := tc.call
			c.URL, c.Timeout = srv.URL+c.URL, time.Minute
			r, err := wire.Send(ctx, srv.Client(), c)
			if err != nil {
				t.Fatal(err)
			}
			if r.Header.Get("Retry-After") != "2" {
				t.Errorf("header Retry-After = %q, want 2", r.Header.Get("Retry-After"))
			}
			r.Header = nil
			if r.Status != tc.want.Status || r.StatusText != tc.want.StatusText || r.ContentType != tc.want.ContentType || string(r.Body) != string(tc.want.Body) {
				t.Errorf("reply = %+v (body %q), want %+v (body %q)", r, r.Body, tc.want, tc.want.Body)
			}
			if k := r.BodyKind(); k != tc.wantKind {
				t.Errorf("BodyKind() = %q, want %q", k, tc.wantKind)
			}
			if *got != tc.wantSeen {
				t.Errorf("server saw %+v, want %+v", *got, tc.wantSeen)
			}
		})
	}
}

// TestSendFailures: no answer is an error that shows no URL (its query
// may hold a credential; the caller names the endpoint), and says which
// kind it is.
func TestSendFailures(t *testing.T) {
	ctx := context.Background()
	hanging, _ := server(t, 200, "", "", true)
	// A port that refuses: a server's, once it is closed.
	gone := httptest.NewServer(http.NotFoundHandler())
	refusing := gone.URL
	gone.Close()
	canceled, cancel := context.WithCancelCause(ctx)
	cancel(errors.New("the run was stopped"))
	tests := []struct {
		name    string
		ctx     context.Context
		url     string
		method  string
		check   func(error) bool
		wantMsg string // "" when the transport's wording varies
	}{
		{name: "no answer within the timeout", ctx: ctx, url: hanging.URL + "/v1/completions?key=secret", method: http.MethodPost,
			check: func(err error) bool { return err == wire.ErrTimeout }, wantMsg: "no answer within the attempt's timeout"},
		{name: "a refused connection", ctx: ctx, url: refusing + "/v1/completions?key=secret", method: http.MethodPost,
			check: func(err error) bool {
				var re *wire.RequestError
				return !errors.Is(err, wire.ErrTimeout) && !errors.As(err, &re) && strings.Contains(err.Error(), "connection refused")
			}},
		{name: "a request that cannot be made", ctx: ctx, url: "http://127.0.0.1:1/x?key=secret", method: "BAD METHOD",
			check: func(err error) bool {
				var re *wire.RequestError
				return errors.As(err, &re)
			}, wantMsg: `net/http: invalid method "BAD METHOD"`},
		{name: "the caller's context ended", ctx: canceled, url: hanging.URL + "/v1/completions?key=secret", method: http.MethodPost,
			check: func(err error) bool { return !errors.Is(err, wire.ErrTimeout) }, wantMsg: "the run was stopped"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := wire.Send(tc.ctx, http.DefaultClient, wire.Call{Method: tc.method, URL: tc.url, Body: []byte(`{}`), Timeout: 200 * time.Millisecond, MaxBody: 10})
			if err == nil || !tc.check(err) {
				t.Fatalf("err = %v (%T): not the kind this case wants", err, err)
			}
			if tc.wantMsg != "" && err.Error() != tc.wantMsg {
				t.Errorf("err = %q, want %q", err, tc.wantMsg)
			}
			if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "/v1/") || strings.Contains(err.Error(), "http://") {
				t.Errorf("err %q shows the URL", err)
			}
		})
	}
}

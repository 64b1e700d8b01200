package openai_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// fakeVLLM is a small hand-written vLLM-like server on loopback. It
// answers each request with what its reply function says (by default a
// completion built from the request), and keeps what it was sent and how
// many requests were in flight at most.
type fakeVLLM struct {
	URL string

	srv   *httptest.Server
	reply func(k int, req seen, w http.ResponseWriter) bool // true: answered

	mu          sync.Mutex
	reqs        []seen
	inFlight    int
	maxInFlight int
	gate        chan struct{} // non-nil: generation requests wait for a token or its close
	arrived     chan int      // non-nil: receives the in-flight count on each arrival
}

// seen is one request as the server received it.
type seen struct {
	Method, Path, Auth string
	Body               map[string]any
}

// Num reads a numeric field of the body.
func (s seen) Num(k string) float64 {
	f, _ := s.Body[k].(float64)
	return f
}

func newFake(t *testing.T, reply func(k int, req seen, w http.ResponseWriter) bool) *fakeVLLM {
	t.Helper()
	f := &fakeVLLM{reply: reply}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	f.URL = f.srv.URL
	return f
}

// Close unblocks waiting requests and stops the server.
func (f *fakeVLLM) Close() {
	f.mu.Lock()
	if f.gate != nil {
		select {
		case <-f.gate:
		default:
			close(f.gate)
		}
	}
	f.mu.Unlock()
	f.srv.Close()
}

// Set replaces the reply function and the gate and arrival channels
// (nil: none).
func (f *fakeVLLM) Set(reply func(k int, req seen, w http.ResponseWriter) bool, gate chan struct{}, arrived chan int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reply, f.gate, f.arrived = reply, gate, arrived
}

func (f *fakeVLLM) Requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

// Generations counts the completions and chat requests received.
func (f *fakeVLLM) Generations() int {
	n := 0
	for _, r := range f.Requests() {
		if r.Path == "/v1/completions" || r.Path == "/v1/chat/completions" {
			n++
		}
	}
	return n
}

func (f *fakeVLLM) MaxInFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxInFlight
}

func (f *fakeVLLM) serve(w http.ResponseWriter, r *http.Request) {
	s := seen{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization")}
	if b, _ := io.ReadAll(r.Body); len(b) > 0 {
		if err := json.Unmarshal(b, &s.Body); err != nil {
			http.Error(w, `{"error":{"message":"bad body"}}`, http.StatusBadRequest)
			return
		}
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, s)
	k := len(f.reqs)
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	gate, arrived, inFlight, reply := f.gate, f.arrived, f.inFlight, f.reply
	f.mu.Unlock()
	// Leave the in-flight count before answering: once the client has the
	// answer it may send the next request.
	leave := sync.OnceFunc(func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	})
	defer leave()
	generation := s.Path == "/v1/completions" || s.Path == "/v1/chat/completions"
	if generation && arrived != nil {
		arrived <- inFlight
	}
	if generation && gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	leave()
	if reply != nil && reply(k, s, w) {
		return
	}
	switch s.Path {
	case "/v1/completions", "/v1/chat/completions":
		writeJSON(w, completion(s))
	case "/v1/load_lora_adapter":
		fmt.Fprintf(w, "Success: LoRA adapter '%s' added successfully.", s.Body["lora_name"])
	case "/v1/unload_lora_adapter":
		fmt.Fprintf(w, "Success: LoRA adapter '%s' removed successfully.", s.Body["lora_name"])
	case "/collective_rpc": // vLLM's dev mode: one result per worker
		writeJSON(w, map[string]any{"results": []any{nil}})
	case "/reset_prefix_cache":
		writeJSON(w, map[string]any{"success": true})
	case "/v1/models":
		writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": "base"}}})
	default:
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
	}
}

// completion is a vLLM-shaped answer to a generation request: choice j
// says "seed S sample j", with three tokens, listed in reverse order to
// check that the client sorts them.
func completion(s seen) map[string]any {
	n := int(s.Num("n"))
	chat := s.Path == "/v1/chat/completions"
	choices := make([]any, n)
	for j := range n {
		text := fmt.Sprintf("seed %d sample %d", int64(s.Num("seed")), j)
		c := map[string]any{"index": j, "finish_reason": "length"}
		if chat {
			c["message"] = map[string]any{"role": "assistant", "content": text}
		} else {
			c["text"] = text
		}
		if s.Body["logprobs"] != nil {
			ids := []int{10 + j, 20 + j, 30 + j}
			lps := []float64{-0.5, float64(float32(-0.1)), -2}
			if chat {
				var content []any
				for k, id := range ids {
					content = append(content, map[string]any{"token": fmt.Sprintf("token_id:%d", id), "logprob": lps[k], "top_logprobs": []any{}})
				}
				c["logprobs"] = map[string]any{"content": content}
			} else {
				var toks []string
				for _, id := range ids {
					toks = append(toks, fmt.Sprintf("token_id:%d", id))
				}
				c["logprobs"] = map[string]any{"tokens": toks, "token_logprobs": lps, "top_logprobs": nil, "text_offset": []int{0, 1, 2}}
			}
		}
		choices[n-1-j] = c
	}
	return map[string]any{"id": "cmpl-1", "object": "text_completion", "model": s.Body["model"],
		"choices": choices, "usage": map[string]any{"prompt_tokens": 7, "completion_tokens": 3 * n, "total_tokens": 7 + 3*n}}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// refusedURL is a loopback address nothing listens on.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

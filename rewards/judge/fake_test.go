package judge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
)

// fakeAPI is a small OpenAI-compatible chat server on loopback. Each
// request gets the reply its answer function chooses; the server keeps
// what it was sent and how many requests were in flight at most.
type fakeAPI struct {
	URL string // the base URL, ending in /v1

	srv    *httptest.Server
	answer func(n int, req seenRequest) reply
	done   chan struct{}

	mu          sync.Mutex
	reqs        []seenRequest
	inFlight    int
	maxInFlight int
	gate        chan struct{} // non-nil: requests wait for it to close
	arrived     chan int      // non-nil: receives the in-flight count on each arrival
}

// reply is what the fake answers to one request.
type reply struct {
	Status  int // default 200
	Header  map[string]string
	Content string
	Refusal string
	Finish  string // default "stop"
	In, Out int    // usage
	Body    string // sent as is instead of a completion
	Hang    bool   // never answer
}

// seenRequest is one request as the server received it.
type seenRequest struct {
	Auth  string
	Query string
	Body  struct {
		Model       string  `json:"model"`
		Temperature float64 `json:"temperature"`
		MaxTokens   int     `json:"max_tokens"`
		Seed        *int    `json:"seed"`
		Messages    []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
}

// says answers every request with content.
func says(content string) func(int, seenRequest) reply {
	return func(int, seenRequest) reply { return reply{Content: content, In: 10, Out: 2} }
}

func newFake(answer func(n int, req seenRequest) reply) *fakeAPI {
	f := &fakeAPI{answer: answer, done: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = f.srv.URL + "/v1"
	return f
}

// Close ends hanging requests and stops the server.
func (f *fakeAPI) Close() {
	close(f.done)
	f.srv.Close()
}

// Requests returns what the server has received.
func (f *fakeAPI) Requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.reqs...)
}

func (f *fakeAPI) Calls() int { return len(f.Requests()) }

func (f *fakeAPI) MaxInFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxInFlight
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"no route `+r.Method+` `+r.URL.Path+`"}}`, http.StatusNotFound)
		return
	}
	var seen seenRequest
	seen.Auth, seen.Query = r.Header.Get("Authorization"), r.URL.RawQuery
	if err := json.NewDecoder(r.Body).Decode(&seen.Body); err != nil || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, `{"error":{"message":"bad request body"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, seen)
	n := len(f.reqs)
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	gate, arrived, inFlight := f.gate, f.arrived, f.inFlight
	f.mu.Unlock()
	// Leave the in-flight count before answering: once the client has the
	// answer it may send the next request.
	leave := func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}
	if arrived != nil {
		arrived <- inFlight
	}
	if gate != nil {
		select {
		case <-gate:
		case <-f.done:
		}
	}
	rep := f.answer(n, seen)
	if rep.Hang {
		select {
		case <-r.Context().Done():
		case <-f.done:
		}
		leave()
		return
	}
	leave()
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	if rep.Status == 0 {
		rep.Status = http.StatusOK
	}
	body := rep.Body
	if body == "" && rep.Status == http.StatusOK {
		body = completion(rep)
	}
	w.WriteHeader(rep.Status)
	fmt.Fprint(w, body)
}

// completion is a chat completion response in OpenAI's shape.
func completion(rep reply) string {
	if rep.Finish == "" {
		rep.Finish = "stop"
	}
	msg := map[string]any{"role": "assistant", "content": rep.Content}
	if rep.Refusal != "" {
		msg["content"], msg["refusal"] = nil, rep.Refusal
	}
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "model": "judge-model",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": rep.Finish}},
		"usage":   map[string]int{"prompt_tokens": rep.In, "completion_tokens": rep.Out, "total_tokens": rep.In + rep.Out},
	})
	return string(b)
}

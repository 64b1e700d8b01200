package openai_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
)

// newClient returns a client of urls whose backoff waits return at once,
// and a func listing the waits asked for.
func newClient(t *testing.T, o openai.Options, urls ...string) (*openai.Client, func() []time.Duration) {
	t.Helper()
	o.Endpoints = urls
	if o.Model == "" {
		o.Model = "base"
	}
	c, err := openai.New(&o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, openai.RecordWaits(c)
}

func reqs(n int) []policy.Request {
	out := make([]policy.Request, n)
	for i := range out {
		out[i] = policy.Request{ID: fmt.Sprintf("r%d", i), Prompt: fmt.Sprintf("prompt %d", i), Seed: int64(100 + i)}
	}
	return out
}

func generate(t *testing.T, c *openai.Client, rs []policy.Request, s policy.Sampling) [][]policy.Sample {
	t.Helper()
	out, err := c.Generate(context.Background(), rs, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(rs) {
		t.Fatalf("%d answers for %d requests", len(out), len(rs))
	}
	return out
}

func wantStatus(t *testing.T, out [][]policy.Sample, status string, errHas ...string) {
	t.Helper()
	for _, ss := range out {
		for _, s := range ss {
			if s.Status != status {
				t.Fatalf("request %s sample %d: status %q (%s), want %q", s.RequestID, s.Index, s.Status, s.Error, status)
			}
			for _, h := range errHas {
				if !strings.Contains(s.Error, h) {
					t.Fatalf("request %s: error %q does not say %q", s.RequestID, s.Error, h)
				}
			}
		}
	}
}

// The request body carries the sampling fields, and the choices come back
// sorted, with token ids parsed and logprobs exact.
func TestRequestAndSamples(t *testing.T) {
	f := newFake(t, nil)
	c, _ := newClient(t, openai.Options{Model: "base", APIKey: "sk-test"}, f.URL+"/v1/")
	rs := []policy.Request{
		{ID: "p", Prompt: "2+2=", Seed: 9},
		{ID: "m", Messages: []policy.Message{{Role: "user", Content: "hi"}}, Seed: -3},
	}
	s := policy.Sampling{N: 3, Temperature: 1, MaxTokens: 5, Stop: []string{"\n"}, Logprobs: true}
	out := generate(t, c, rs, s)
	wantStatus(t, out, policy.StatusOK)
	for i, r := range rs {
		for j, smp := range out[i] {
			want := policy.Sample{RequestID: r.ID, Index: j, Text: fmt.Sprintf("seed %d sample %d", r.Seed, j),
				TokenIDs: []int32{int32(10 + j), int32(20 + j), int32(30 + j)}, Logprobs: []float32{-0.5, -0.1, -2},
				FinishReason: policy.FinishLength, PromptTokens: 7, PolicyVersion: "base", Status: policy.StatusOK}
			if !reflect.DeepEqual(smp, want) {
				t.Errorf("request %s sample %d:\n got %+v\nwant %+v", r.ID, j, smp, want)
			}
		}
	}
	if lp := out[0][0].Logprobs[1]; math.Float32bits(lp) != math.Float32bits(-0.1) {
		t.Errorf("logprob %v is not float32(-0.1) bit for bit", lp)
	}
	got := f.Requests()
	byPath := map[string]seen{}
	for _, r := range got {
		byPath[r.Path] = r
	}
	comp, chat := byPath["/v1/completions"], byPath["/v1/chat/completions"]
	for _, tc := range []struct {
		r     seen
		field string
		want  any
	}{
		{comp, "model", "base"}, {comp, "prompt", "2+2="}, {comp, "n", 3.0}, {comp, "seed", 9.0},
		{comp, "temperature", 1.0}, {comp, "max_tokens", 5.0}, {comp, "stop", []any{"\n"}},
		{comp, "logprobs", 1.0}, {comp, "return_tokens_as_token_ids", true}, {comp, "return_token_ids", true},
		{chat, "seed", -3.0}, {chat, "logprobs", true}, {chat, "top_logprobs", 0.0}, {chat, "return_tokens_as_token_ids", true},
		{chat, "messages", []any{map[string]any{"role": "user", "content": "hi"}}},
	} {
		if v := tc.r.Body[tc.field]; !reflect.DeepEqual(v, tc.want) {
			t.Errorf("%s: %s = %#v, want %#v", tc.r.Path, tc.field, v, tc.want)
		}
	}
	if _, ok := comp.Body["top_p"]; ok {
		t.Errorf("top_p sent though unset")
	}
	if comp.Auth != "Bearer sk-test" {
		t.Errorf("Authorization %q", comp.Auth)
	}
}

// Greedy sampling asks for one choice, which vLLM requires ("n must be 1
// when using greedy sampling"), and repeats it N times.
func TestGreedyAsksForOne(t *testing.T) {
	f := newFake(t, nil)
	c, _ := newClient(t, openai.Options{}, f.URL)
	out := generate(t, c, []policy.Request{{ID: "p", Prompt: "2+2=", Seed: 9}}, policy.Sampling{N: 3, MaxTokens: 5, Logprobs: true})
	wantStatus(t, out, policy.StatusOK)
	if got := f.Requests(); len(got) != 1 || got[0].Num("n") != 1 || got[0].Num("temperature") != 0 {
		t.Fatalf("requests %+v: want one with n 1 and temperature 0", got)
	}
	for j, smp := range out[0] {
		want := out[0][0]
		want.Index = j
		if smp.Index != j || !reflect.DeepEqual(smp, want) {
			t.Errorf("sample %d = %+v, want the first repeated: %+v", j, smp, want)
		}
	}
}

// With two endpoints, one refusing connections, every request is served
// by the other.
func TestEndpointDown(t *testing.T) {
	f := newFake(t, nil)
	down := refusedURL(t)
	c, waits := newClient(t, openai.Options{Retries: 2}, down, f.URL)
	out := generate(t, c, reqs(6), policy.Sampling{N: 2})
	wantStatus(t, out, policy.StatusOK)
	if got := f.Generations(); got != 6 {
		t.Errorf("the healthy endpoint served %d requests, want 6", got)
	}
	st := c.Stats()
	if st[0].Requests == 0 || !st[0].Cooling || st[1].Cooling {
		t.Errorf("stats %+v: the down endpoint should have been tried once and be cooling", st)
	}
	if w := waits(); len(w) != 0 {
		t.Errorf("waited %v before retrying on a healthy endpoint", w)
	}
}

// With every endpoint down, the samples are infra errors that name the
// endpoint and say what to do; Generate itself does not fail.
func TestAllEndpointsDown(t *testing.T) {
	a, b := refusedURL(t), refusedURL(t)
	c, waits := newClient(t, openai.Options{Retries: 3, Backoff: time.Second, MaxBackoff: 3 * time.Second}, a, b)
	out := generate(t, c, reqs(2), policy.Sampling{N: 3})
	wantStatus(t, out, policy.StatusInfraError, "127.0.0.1:", "gave up after 4 attempts", "next: start the server")
	if len(out[0]) != 3 || out[0][2].Index != 2 || out[0][0].FinishReason != policy.FinishError {
		t.Errorf("want 3 error samples, got %+v", out[0])
	}
	for _, w := range waits() {
		if w < 500*time.Millisecond || w > 3*time.Second {
			t.Errorf("wait %v outside [Backoff/2, MaxBackoff]", w)
		}
	}
}

// An endpoint that does not answer within the per-attempt timeout is
// retried; a request that never gets an answer has status timeout.
func TestSlowEndpointTimeout(t *testing.T) {
	f := newFake(t, nil)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) }) // before the server's Close
	f.Set(func(k int, r seen, w http.ResponseWriter) bool {
		<-hang // the client gives up first
		return true
	}, nil, nil)
	c, _ := newClient(t, openai.Options{Timeout: 50 * time.Millisecond, Retries: 1}, f.URL)
	out := generate(t, c, reqs(1), policy.Sampling{N: 2})
	wantStatus(t, out, policy.StatusTimeout, "no answer within 50ms", "gave up after 2 attempts", "Options.Timeout")
	if got := f.Generations(); got != 2 {
		t.Errorf("%d attempts reached the server, want 2", got)
	}
}

// A first attempt that times out is retried and the retry's answer kept.
func TestSlowThenFast(t *testing.T) {
	f := newFake(t, nil)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	f.Set(func(k int, r seen, w http.ResponseWriter) bool {
		if k == 1 {
			<-hang
			return true
		}
		return false
	}, nil, nil)
	c, _ := newClient(t, openai.Options{Timeout: 2 * time.Second, Retries: 2}, f.URL)
	out := generate(t, c, reqs(1), policy.Sampling{N: 2})
	wantStatus(t, out, policy.StatusOK)
	if got := f.Generations(); got != 2 {
		t.Errorf("%d attempts, want 2", got)
	}
}

// A 2xx body that is not JSON is an infra error naming the endpoint and
// the byte offset, after the retries.
func TestMalformedJSON(t *testing.T) {
	f := newFake(t, func(k int, r seen, w http.ResponseWriter) bool {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices": [{"index": 0, "text": "ok"}, }`)
		return true
	})
	c, _ := newClient(t, openai.Options{Retries: 1}, f.URL)
	out := generate(t, c, reqs(1), policy.Sampling{N: 2})
	wantStatus(t, out, policy.StatusInfraError, f.URL+"/v1/completions", "malformed JSON at byte 42", "gave up after 2 attempts", "OpenAI-compatible")

	// A well-formed answer with the wrong number of choices is no better.
	f.Set(func(k int, r seen, w http.ResponseWriter) bool {
		writeJSON(w, map[string]any{"choices": []any{map[string]any{"index": 0, "text": "one"}}})
		return true
	}, nil, nil)
	out = generate(t, c, reqs(1), policy.Sampling{N: 2, Temperature: 1})
	wantStatus(t, out, policy.StatusInfraError, "1 choice(s) for n=2")
}

// A 429 is retried after the server's Retry-After, not the backoff.
func Test429RetryAfter(t *testing.T) {
	f := newFake(t, func(k int, r seen, w http.ResponseWriter) bool {
		if k == 1 {
			w.Header().Set("Retry-After", "2")
			http.Error(w, `{"error":{"message":"too many requests"}}`, http.StatusTooManyRequests)
			return true
		}
		return false
	})
	c, waits := newClient(t, openai.Options{Backoff: 10 * time.Millisecond}, f.URL)
	out := generate(t, c, reqs(1), policy.Sampling{N: 1})
	wantStatus(t, out, policy.StatusOK)
	if w := waits(); !reflect.DeepEqual(w, []time.Duration{2 * time.Second}) {
		t.Errorf("waits %v, want [2s] from Retry-After", w)
	}
	// Retry-After is capped by MaxBackoff.
	f.Set(func(k int, r seen, w http.ResponseWriter) bool {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
		return true
	}, nil, nil)
	c2, waits2 := newClient(t, openai.Options{Retries: 1, MaxBackoff: 5 * time.Second}, f.URL)
	out = generate(t, c2, reqs(1), policy.Sampling{N: 1})
	wantStatus(t, out, policy.StatusInfraError, "429 Too Many Requests", "lower Options.Concurrency")
	if w := waits2(); !reflect.DeepEqual(w, []time.Duration{5 * time.Second}) {
		t.Errorf("waits %v, want [5s]", w)
	}
}

// A 500 is retried and the retry's answer kept.
func Test500ThenSuccess(t *testing.T) {
	f := newFake(t, func(k int, r seen, w http.ResponseWriter) bool {
		if k == 1 {
			http.Error(w, `{"error":{"message":"CUDA error: an illegal memory access"}}`, http.StatusInternalServerError)
			return true
		}
		return false
	})
	c, waits := newClient(t, openai.Options{Seed: 1}, f.URL)
	out := generate(t, c, reqs(1), policy.Sampling{N: 2})
	wantStatus(t, out, policy.StatusOK)
	if got := f.Generations(); got != 2 {
		t.Errorf("%d attempts, want 2", got)
	}
	if w := waits(); len(w) != 1 || w[0] < openai.DefaultBackoff/2 || w[0] > openai.DefaultBackoff {
		t.Errorf("waits %v, want one in [250ms, 500ms]", w)
	}
}

// A 400 (a prompt too long for the context) is StatusInvalid with the
// server's message, and is not retried.
func Test400PromptTooLong(t *testing.T) {
	msg := "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4900 in the messages, 100 in the completion)."
	f := newFake(t, func(k int, r seen, w http.ResponseWriter) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"object":"error","message":%q,"type":"BadRequestError","param":null,"code":400}`, msg)
		return true
	})
	c, waits := newClient(t, openai.Options{}, f.URL)
	out := generate(t, c, reqs(1), policy.Sampling{N: 4})
	wantStatus(t, out, policy.StatusInvalid, "400 Bad Request", "maximum context length is 4096", "shorten the prompt")
	if got := f.Generations(); got != 1 {
		t.Errorf("%d attempts, want 1", got)
	}
	if len(waits()) != 0 {
		t.Errorf("waited before giving up on a 400")
	}
}

// A 401 is not retried and says which variable to check, without echoing
// the key.
func Test401(t *testing.T) {
	f := newFake(t, func(k int, r seen, w http.ResponseWriter) bool {
		http.Error(w, `{"error":{"message":"Incorrect API key provided: sk-secret"}}`, http.StatusUnauthorized)
		return true
	})
	for _, tc := range []struct {
		name string
		o    openai.Options
		says []string
	}{
		{"key from key_env", openai.Options{APIKey: "sk-secret", KeyEnv: "VLLM_API_KEY"},
			[]string{"check the API key: $VLLM_API_KEY (policy.key_env) must hold the server's token", "RLPIPE_POLICY_TOKEN", "--api-key"}},
		{"key from Go", openai.Options{APIKey: "sk-secret"},
			[]string{"check the API key: the variable the policy's key_env names", "Options.APIKey"}},
		{"no key", openai.Options{},
			[]string{"the request carried no API key: name the variable", "in the policy's key_env and export it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.Generations()
			c, _ := newClient(t, tc.o, f.URL)
			out := generate(t, c, reqs(1), policy.Sampling{N: 1})
			wantStatus(t, out, policy.StatusInfraError, append([]string{"401 Unauthorized"}, tc.says...)...)
			if strings.Contains(out[0][0].Error, "sk-secret") {
				t.Errorf("the error shows the key: %s", out[0][0].Error)
			}
			if got := f.Generations() - before; got != 1 {
				t.Errorf("%d attempts, want 1", got)
			}
		})
	}
}

// The API key never shows: not in String, %v or %#v of the options, nor
// in errors whose server body echoes it.
func TestAPIKeyRedacted(t *testing.T) {
	f := newFake(t, func(k int, r seen, w http.ResponseWriter) bool {
		http.Error(w, "upstream said: bad key sk-secret", http.StatusBadGateway)
		return true
	})
	o := openai.Options{Endpoints: []string{f.URL}, APIKey: "sk-secret", Retries: -1}
	c, _ := newClient(t, o, "http://user:pw@127.0.0.1:1/v1", f.URL)
	for _, s := range []string{o.String(), fmt.Sprintf("%v", o), fmt.Sprintf("%+v", o), fmt.Sprintf("%#v", o), c.String()} {
		if strings.Contains(s, "sk-secret") || strings.Contains(s, "pw") || !strings.Contains(s, "[redacted]") {
			t.Errorf("leaks or hides nothing: %s", s)
		}
	}
	out, _ := c.Generate(context.Background(), reqs(1), policy.Sampling{})
	for _, ss := range out {
		if e := ss[0].Error; strings.Contains(e, "sk-secret") || strings.Contains(e, "pw@") {
			t.Errorf("error leaks a secret: %s", e)
		}
	}
}

// Generate's error is for a canceled ctx and for an adapter the servers
// do not hold.
func TestGenerateErrors(t *testing.T) {
	f := newFake(t, func(k int, r seen, w http.ResponseWriter) bool {
		if r.Body["model"] == "step-9" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"message":"The model `+"`step-9`"+` does not exist.","type":"NotFoundError","param":"model","code":404}}`)
			return true
		}
		return false
	})
	c, _ := newClient(t, openai.Options{}, f.URL)
	_, err := c.Generate(context.Background(), reqs(3), policy.Sampling{Adapter: "step-9"})
	if !errors.Is(err, policy.ErrAdapterNotLoaded) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("unknown adapter: %v, want ErrAdapterNotLoaded with the server's message", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	arrived := make(chan int, 10)
	f.Set(nil, make(chan struct{}), arrived)
	go func() { <-arrived; cancel() }()
	if _, err := c.Generate(ctx, reqs(3), policy.Sampling{}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v, want context.Canceled", err)
	}
}

// Requests one at a time go round the endpoints in turn; requests held in
// flight spread evenly.
func TestLoadBalancing(t *testing.T) {
	fs := []*fakeVLLM{newFake(t, nil), newFake(t, nil), newFake(t, nil)}
	c, _ := newClient(t, openai.Options{}, fs[0].URL, fs[1].URL, fs[2].URL)
	for i := range 30 {
		generate(t, c, reqs(1)[0:1], policy.Sampling{N: 1 + i%2})
	}
	for i, f := range fs {
		if got := f.Generations(); got != 10 {
			t.Errorf("endpoint %d served %d of 30 sequential requests, want 10", i, got)
		}
	}
	// Hold 12 requests in flight: each endpoint gets 4.
	gate := make(chan struct{})
	arrived := make(chan int, 12)
	for _, f := range fs {
		f.Set(nil, gate, arrived)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		generate(t, c, reqs(12), policy.Sampling{N: 1})
	}()
	for range 12 {
		<-arrived
	}
	for i, st := range c.Stats() {
		if st.InFlight != 4 {
			t.Errorf("endpoint %d has %d in flight, want 4: %+v", i, st.InFlight, c.Stats())
		}
	}
	close(gate)
	<-done
}

// At most Concurrency requests are in flight per endpoint, however many
// Generate is given.
func TestConcurrencyBound(t *testing.T) {
	f := newFake(t, nil)
	release, arrived := make(chan struct{}), make(chan int, 100)
	f.Set(nil, release, arrived)
	c, _ := newClient(t, openai.Options{Concurrency: 3}, f.URL)
	var wg sync.WaitGroup
	var out [][]policy.Sample
	wg.Go(func() { out = generate(t, c, reqs(40), policy.Sampling{N: 2}) })
	for range 3 {
		<-arrived
	}
	// Let the requests through one by one; each freed slot admits one more.
	for range 40 {
		release <- struct{}{}
	}
	wg.Wait()
	wantStatus(t, out, policy.StatusOK)
	if m := f.MaxInFlight(); m != 3 {
		t.Errorf("max in flight %d, want 3", m)
	}
}

// The prompt's token ids, where vLLM puts them with return_token_ids (a
// chat answer's top level, a completions choice), become Sample.Prompt;
// a server that sends none leaves it nil.
func TestPromptTokenIDs(t *testing.T) {
	f := newFake(t, func(k int, r seen, w http.ResponseWriter) bool {
		if strings.HasSuffix(r.Path, "/chat/completions") {
			writeJSON(w, map[string]any{"prompt_token_ids": []int{7, 8, 9},
				"choices": []any{map[string]any{"index": 0, "message": map[string]any{"content": "hi"}, "token_ids": []int{3, 2}}}})
			return true
		}
		writeJSON(w, map[string]any{"choices": []any{
			map[string]any{"index": 0, "text": "a", "token_ids": []int{4}, "prompt_token_ids": []int{5, 6}},
			map[string]any{"index": 1, "text": "b", "token_ids": []int{4}},
		}})
		return true
	})
	c, _ := newClient(t, openai.Options{}, f.URL)
	chat := generate(t, c, []policy.Request{{ID: "c", Messages: []policy.Message{{Role: "user", Content: "x"}}}}, policy.Sampling{N: 1})
	if p := chat[0][0].Prompt; p == nil || fmt.Sprint(p.TokenIDs) != "[7 8 9]" || fmt.Sprint(chat[0][0].TokenIDs) != "[3 2]" {
		t.Errorf("chat: prompt %+v, tokens %v", p, chat[0][0].TokenIDs)
	}
	comp := generate(t, c, reqs(1), policy.Sampling{N: 2, Temperature: 1})
	if p := comp[0][0].Prompt; p == nil || fmt.Sprint(p.TokenIDs) != "[5 6]" || comp[0][1].Prompt != nil {
		t.Errorf("completions: prompts %+v and %+v", comp[0][0].Prompt, comp[0][1].Prompt)
	}
}

package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/server"
)

// serve runs p behind a Server in httptest and returns its URL.
func serve(t *testing.T, p policy.Policy, o *server.Options) (string, *server.Server) {
	t.Helper()
	srv, err := server.New(p, o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL, srv
}

// do sends one request and returns the status and the decoded body (the
// raw text under "text" when it is not JSON).
func do(t *testing.T, method, url, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		m = map[string]any{"text": string(b)}
	}
	return resp.StatusCode, m
}

// apiErr checks that m is an OpenAI error body and returns its error.
func apiErr(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("body %v is not {\"error\": {...}}", m)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			t.Errorf("error %v lacks %q", e, k)
		}
	}
	return e
}

// Bad requests are answered with an OpenAI error of the right status that
// names the problem, never a panic.
func TestBadRequests(t *testing.T) {
	url, _ := serve(t, newDetPolicy("det"), &server.Options{Model: "det", MaxBodyBytes: 1 << 10, MaxSamples: 16})
	big := `{"prompt": "` + strings.Repeat("x", 2000) + `"}`
	cases := []struct {
		name, method, path, body string
		status                   int
		param                    any
		says                     string
	}{
		{"invalid JSON", "POST", "/v1/completions", `{"prompt": "a", "n": 2,}`, 400, nil, "invalid JSON at byte 24 of 24"},
		{"not an object", "POST", "/v1/completions", `[1, 2]`, 400, nil, "must be a JSON object"},
		{"n zero", "POST", "/v1/completions", `{"prompt": "a", "n": 0}`, 400, "n", "at least 1"},
		{"n a string", "POST", "/v1/completions", `{"prompt": "a", "n": "2"}`, 400, "n", `field "n" must be an integer`},
		{"n fractional", "POST", "/v1/completions", `{"prompt": "a", "n": 1.5}`, 400, "n", "integer"},
		{"negative temperature", "POST", "/v1/completions", `{"prompt": "a", "temperature": -0.5}`, 400, "temperature", "≥ 0"},
		{"temperature a string", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "temperature": "hot"}`, 400, "temperature", "number"},
		{"top_p above 1", "POST", "/v1/completions", `{"prompt": "a", "top_p": 1.5}`, 400, "top_p", "(0, 1]"},
		{"negative max_tokens", "POST", "/v1/completions", `{"prompt": "a", "max_tokens": -1}`, 400, "max_tokens", "≥ 1"},
		{"stop a number", "POST", "/v1/completions", `{"prompt": "a", "stop": 5}`, 400, "stop", "string or a list of strings"},
		{"prompt missing", "POST", "/v1/completions", `{"n": 1}`, 400, "prompt", "missing"},
		{"prompt of ids and text", "POST", "/v1/completions", `{"prompt": [1, "a"]}`, 400, "prompt", `field "prompt" must be a string or a list of strings, a list of token ids or a list of such lists`},
		{"prompt of fractional ids", "POST", "/v1/completions", `{"prompt": [1, 2.5]}`, 400, "prompt", `field "prompt" must be a string or a list of strings, a list of token ids or a list of such lists`},
		{"empty token-id prompt", "POST", "/v1/completions", `{"prompt": [[1], []]}`, 400, "prompt", "prompt 1 is an empty list of token ids; send at least one token"},
		{"echo of token ids", "POST", "/v1/completions", `{"prompt": [1, 2], "echo": true}`, 400, "echo", "echo is not served for a prompt of token ids; send the prompt as text to echo it"},
		{"prompt empty list", "POST", "/v1/completions", `{"prompt": []}`, 400, "prompt", "empty list"},
		{"logprobs a string", "POST", "/v1/completions", `{"prompt": "a", "logprobs": "yes"}`, 400, "logprobs", "integer"},
		{"chat logprobs a number", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "logprobs": 3}`, 400, "logprobs", "true or false"},
		{"chat content parts", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}]}`, 400, "messages.content", "string"},
		{"chat without messages", "POST", "/v1/chat/completions", `{"prompt": "a"}`, 400, "prompt", "messages"},
		{"stream_options without stream", "POST", "/v1/completions", `{"prompt": "a", "stream_options": {"include_usage": true}}`, 400, "stream_options", "only allowed with stream: true"},
		{"logprobs past 20", "POST", "/v1/completions", `{"prompt": "a", "logprobs": 21}`, 400, "logprobs", "from 0 to 20"},
		{"top_logprobs past 20", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "logprobs": true, "top_logprobs": 21}`, 400, "top_logprobs", "from 0 to 20"},
		{"top_logprobs without logprobs", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "top_logprobs": 2}`, 400, "top_logprobs", "send logprobs: true"},
		{"chat echo", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "echo": true}`, 400, "echo", "/v1/completions"},
		{"too many samples", "POST", "/v1/completions", `{"prompt": ["a", "b", "c"], "n": 6}`, 400, "n", "at most 16"},
		{"n × prompts overflows", "POST", "/v1/completions", `{"prompt": ["a", "b", "c", "d"], "n": 4611686018427387904}`, 400, "n", "at most 16"},
		{"unknown model", "POST", "/v1/completions", `{"prompt": "a", "model": "gpt-9"}`, 404, "model", "`gpt-9` does not exist"},
		{"body too large", "POST", "/v1/completions", big, 413, nil, "larger than 1024 bytes"},
		{"wrong method", "GET", "/v1/completions", ``, 405, nil, "use POST"},
		{"unknown route", "POST", "/v1/embeddings", `{}`, 404, nil, "no route POST /v1/embeddings"},
		{"response_format json_object", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "response_format": {"type": "json_object"}}`, 400, "response_format",
			`response_format type "json_object" is not supported: this server samples free text and enforces no JSON mode or schema; leave response_format out or send {"type": "text"}`},
		{"response_format json_schema on completions", "POST", "/v1/completions", `{"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}`, 400, "response_format",
			`response_format type "json_schema" is not supported`},
		{"response_format a string", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "response_format": "json"}`, 400, "response_format",
			`response_format must be an object such as {"type": "text"}, got "json"`},
		{"unknown role", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}, {"role": "narrator", "content": "b"}]}`, 400, "messages[1].role",
			`messages[1].role is "narrator": use one of system, developer, user, assistant, tool`},
		{"missing role", "POST", "/v1/chat/completions", `{"messages": [{"content": "a"}]}`, 400, "messages[0].role",
			`messages[0].role is "": use one of system, developer, user, assistant, tool`},
		{"unknown model by id", "GET", "/v1/models/gpt-9", ``, 404, "model",
			"The model `gpt-9` does not exist: this server serves \"det\"; load an adapter with POST /v1/load_lora_adapter"},
		{"model by id posted", "POST", "/v1/models/det", `{}`, 405, nil, "POST /v1/models/det: use GET"},
		{"load without path", "POST", "/v1/load_lora_adapter", `{"lora_name": "x"}`, 400, "lora_name", "lora_path"},
		{"unload unknown", "POST", "/v1/unload_lora_adapter", `{"lora_name": "x"}`, 404, "lora_name", "cannot be found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := do(t, tc.method, url+tc.path, tc.body)
			if status != tc.status {
				t.Errorf("status %d, want %d: %v", status, tc.status, body)
			}
			e := apiErr(t, body)
			if !reflect.DeepEqual(e["param"], tc.param) {
				t.Errorf("param %v, want %v", e["param"], tc.param)
			}
			if msg, _ := e["message"].(string); !strings.Contains(msg, tc.says) {
				t.Errorf("message %q does not say %q", msg, tc.says)
			}
		})
	}
}

// A completions request may carry several prompts: choice i·n+j is sample
// j of prompt i, and usage adds up.
func TestPromptList(t *testing.T) {
	p := newDetPolicy("det")
	url, _ := serve(t, p, nil)
	status, body := do(t, "POST", url+"/v1/completions",
		`{"prompt": ["one", "two"], "n": 2, "seed": 5, "temperature": 1, "logprobs": 0, "return_token_ids": true}`)
	if status != 200 {
		t.Fatalf("status %d: %v", status, body)
	}
	want, _ := p.Generate(context.Background(), []policy.Request{{Prompt: "one", Seed: 5}, {Prompt: "two", Seed: 5}},
		policy.Sampling{N: 2, Temperature: 1, Logprobs: true})
	choices := body["choices"].([]any)
	if len(choices) != 4 {
		t.Fatalf("%d choices, want 4", len(choices))
	}
	tokens := 0
	for k, c := range choices {
		c := c.(map[string]any)
		smp := want[k/2][k%2]
		if c["index"] != float64(k) || c["text"] != smp.Text || c["finish_reason"] != smp.FinishReason {
			t.Errorf("choice %d = %v, want sample %d of prompt %d: %+v", k, c, k%2, k/2, smp)
		}
		if got := c["logprobs"].(map[string]any)["tokens"].([]any); len(got) != len(smp.TokenIDs) {
			t.Errorf("choice %d: %d logprob tokens, want %d", k, len(got), len(smp.TokenIDs))
		}
		tokens += len(smp.TokenIDs)
	}
	u := body["usage"].(map[string]any)
	if u["prompt_tokens"] != float64(6) || u["completion_tokens"] != float64(tokens) || u["total_tokens"] != float64(6+tokens) {
		t.Errorf("usage %v, want 6 prompt and %d completion tokens", u, tokens)
	}
	if body["model"] != server.DefaultModel || body["object"] != "text_completion" {
		t.Errorf("model %v object %v", body["model"], body["object"])
	}
}

// Samples that failed fail the request: invalid → 400, timeout → 504,
// anything else → 500; a panicking policy → 500, and the server lives on.
func TestSampleStatuses(t *testing.T) {
	for _, tc := range []struct {
		status string
		code   int
	}{
		{policy.StatusInvalid, 400},
		{policy.StatusTimeout, 504},
		{policy.StatusInfraError, 500},
	} {
		p := newDetPolicy("det")
		p.failWith = tc.status
		url, _ := serve(t, p, nil)
		status, body := do(t, "POST", url+"/v1/completions", `{"prompt": "a", "n": 2}`)
		if status != tc.code {
			t.Errorf("%s: status %d, want %d", tc.status, status, tc.code)
		}
		if msg := apiErr(t, body)["message"].(string); !strings.Contains(msg, "policy failure "+tc.status) {
			t.Errorf("%s: message %q lacks the sample's error", tc.status, msg)
		}
	}
	url, _ := serve(t, panicky{}, nil)
	status, body := do(t, "POST", url+"/v1/completions", `{"prompt": "a"}`)
	if status != 500 || !strings.Contains(apiErr(t, body)["message"].(string), "boom") {
		t.Errorf("panic: %d %v", status, body)
	}
	if status, _ := do(t, "GET", url+"/health", ""); status != 200 {
		t.Errorf("health after a panic: %d", status)
	}
}

type panicky struct{}

func (panicky) Generate(context.Context, []policy.Request, policy.Sampling) ([][]policy.Sample, error) {
	panic("boom")
}

// Models lists the base model and the adapters; adapters load once, and
// a policy that loads none answers 404.
func TestModelsAndAdapters(t *testing.T) {
	url, srv := serve(t, newDetPolicy("det"), &server.Options{Model: "det"})
	if status, body := do(t, "POST", url+"/v1/load_lora_adapter", `{"lora_name": "s1", "lora_path": "/ckpt/s1"}`); status != 200 || !strings.Contains(body["text"].(string), "Success") {
		t.Fatalf("load: %d %v", status, body)
	}
	status, body := do(t, "POST", url+"/v1/load_lora_adapter", `{"lora_name": "s1", "lora_path": "/ckpt/s1"}`)
	if status != 400 || !strings.Contains(apiErr(t, body)["message"].(string), "already been loaded") {
		t.Errorf("second load: %d %v", status, body)
	}
	status, body = do(t, "POST", url+"/v1/load_lora_adapter", `{"lora_name": "s2", "lora_path": "/missing/s2"}`)
	if status != 400 || !strings.Contains(apiErr(t, body)["message"].(string), "server's machine") {
		t.Errorf("missing dir: %d %v", status, body)
	}
	_, body = do(t, "GET", url+"/v1/models", "")
	var ids []string
	for _, m := range body["data"].([]any) {
		ids = append(ids, m.(map[string]any)["id"].(string))
	}
	if !reflect.DeepEqual(ids, []string{"det", "s1"}) || !reflect.DeepEqual(srv.Adapters(), []string{"s1"}) {
		t.Errorf("models %v, adapters %v; want [det s1], [s1]", ids, srv.Adapters())
	}
	// One model by id, in OpenAI's shape; an adapter names its base.
	for id, want := range map[string]map[string]any{
		"det": {"id": "det", "object": "model", "owned_by": "rlpipe", "root": "det", "parent": nil},
		"s1":  {"id": "s1", "object": "model", "owned_by": "rlpipe", "root": "/ckpt/s1", "parent": "det"},
	} {
		status, body := do(t, "GET", url+"/v1/models/"+id, "")
		if _, ok := body["created"].(float64); status != 200 || !ok {
			t.Errorf("GET /v1/models/%s: %d %v", id, status, body)
		}
		delete(body, "created")
		if !reflect.DeepEqual(body, want) {
			t.Errorf("GET /v1/models/%s = %v, want %v", id, body, want)
		}
	}
	// response_format text is what the server samples anyway; the roles
	// OpenAI defines are read.
	if status, body := do(t, "POST", url+"/v1/chat/completions", `{"model": "s1", "response_format": {"type": "text"}, "messages": [{"role": "developer", "content": "d"}, {"role": "system", "content": "s"}, {"role": "user", "content": "a"}]}`); status != 200 {
		t.Errorf("chat with the adapter: %d %v", status, body)
	}
	if status, _ := do(t, "POST", url+"/v1/unload_lora_adapter", `{"lora_name": "s1"}`); status != 200 {
		t.Errorf("unload: %d", status)
	}
	if status, _ := do(t, "POST", url+"/v1/completions", `{"model": "s1", "prompt": "a"}`); status != 404 {
		t.Errorf("unloaded adapter: %d, want 404", status)
	}
	url2, _ := serve(t, panicky{}, nil)
	if status, _ := do(t, "POST", url2+"/v1/load_lora_adapter", `{"lora_name": "s1", "lora_path": "/ckpt/s1"}`); status != 404 {
		t.Errorf("a policy without adapters: %d, want 404", status)
	}
}

// With a token, every request but /health needs it.
func TestTokenRequired(t *testing.T) {
	url, _ := serve(t, newDetPolicy("det"), &server.Options{Token: "s3cret"})
	body := `{"prompt": "a"}`
	for _, tc := range []struct {
		name   string
		header []string
		status int
	}{
		{"none", nil, 401},
		{"wrong", []string{"Authorization", "Bearer s3cre"}, 401},
		{"not bearer", []string{"Authorization", "Basic s3cret"}, 401},
		{"right", []string{"Authorization", "Bearer s3cret"}, 200},
	} {
		status, resp := do(t, "POST", url+"/v1/completions", body, tc.header...)
		if status != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, status, tc.status)
		}
		if status == 401 {
			e := apiErr(t, resp)
			msg, _ := e["message"].(string)
			if e["code"] != "invalid_api_key" || !strings.Contains(msg, "RLPIPE_POLICY_TOKEN") || !strings.Contains(msg, "key_env") || strings.Contains(msg, "APIKey") {
				t.Errorf("%s: %v; want invalid_api_key naming RLPIPE_POLICY_TOKEN and key_env", tc.name, resp)
			}
		}
	}
	if status, _ := do(t, "GET", url+"/health", ""); status != 200 {
		t.Errorf("health without the token: %d", status)
	}
}

// A server binds loopback by default and refuses any other address
// without a token.
func TestBindNeedsToken(t *testing.T) {
	p := newDetPolicy("det")
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:8000"} {
		if _, err := server.New(p, &server.Options{Addr: addr}); !errors.Is(err, server.ErrNeedToken) {
			t.Errorf("New(%s) without a token: %v, want ErrNeedToken", addr, err)
		}
	}
	ctx := context.Background()
	for _, addr := range []string{"", "127.0.0.1:0", "localhost:0"} {
		srv, err := server.New(p, &server.Options{Addr: addr})
		if err != nil {
			t.Fatalf("New(%q): %v", addr, err)
		}
		l, err := srv.Listen(ctx)
		if err != nil {
			t.Fatalf("Listen(%q): %v", addr, err)
		}
		l.Close()
	}
	srv, err := server.New(p, &server.Options{Addr: "0.0.0.0:0", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := srv.Listen(ctx)
	if err != nil {
		t.Fatalf("Listen on 0.0.0.0 with a token: %v", err)
	}
	l.Close()
	if s := (server.Options{Token: "t0ken"}).String(); strings.Contains(s, "t0ken") {
		t.Errorf("Options.String shows the token: %s", s)
	}
}

// Serve lets a request in flight finish after its ctx ends, then returns.
func TestGracefulShutdown(t *testing.T) {
	p := &blocking{entered: make(chan struct{}), release: make(chan struct{})}
	srv, err := server.New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l, err := srv.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()
	answered := make(chan int, 1)
	go func() {
		resp, err := http.Post("http://"+l.Addr().String()+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "a"}`))
		if err != nil {
			answered <- -1
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	<-p.entered
	cancel()
	select {
	case err := <-served:
		t.Fatalf("Serve returned (%v) with a request in flight", err)
	default:
	}
	close(p.release)
	if code := <-answered; code != 200 {
		t.Errorf("the request in flight got %d, want 200", code)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// blocking is a policy whose Generate waits until release is closed.
type blocking struct {
	entered, release chan struct{}
}

func (b *blocking) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	b.entered <- struct{}{}
	<-b.release
	out := make([][]policy.Sample, len(reqs))
	for i, r := range reqs {
		out[i] = []policy.Sample{{RequestID: r.ID, Text: "done", FinishReason: policy.FinishStop, Status: policy.StatusOK}}
	}
	return out, nil
}

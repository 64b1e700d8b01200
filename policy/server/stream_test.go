package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/server"
)

// events reads a text/event-stream answer into its data payloads,
// checking that it is one, that every event is data: ...\n\n and that the
// last is [DONE].
func events(t *testing.T, resp *http.Response) []string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q, want 200 text/event-stream: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	body := string(b)
	if !strings.HasSuffix(body, "\n\n") {
		t.Fatalf("the stream does not end with a blank line: %q", body)
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("event %q is not one data: line", ev)
		}
		out = append(out, data)
	}
	if out[len(out)-1] != "[DONE]" {
		t.Fatalf("the last event is %q, want [DONE]", out[len(out)-1])
	}
	return out[:len(out)-1]
}

func streamPost(t *testing.T, url, body string) []string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return events(t, resp)
}

// scripted is a policy that answers every prompt with the same samples
// and spells token 0 as <eos> (no text) and token k as the k-th letter.
type scripted struct{ samples []policy.Sample }

func (p scripted) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	out := make([][]policy.Sample, len(reqs))
	for i, r := range reqs {
		out[i] = make([]policy.Sample, len(p.samples))
		for j, smp := range p.samples {
			smp.RequestID, smp.Index, smp.Status = r.ID, j, policy.StatusOK
			out[i][j] = smp
		}
	}
	return out, nil
}

func (scripted) TokenText(id int32) string {
	if id == 0 {
		return "<eos>"
	}
	return string(rune('a' + id - 1))
}

func tl(id int32, lp float32) []policy.TokenLogprob {
	return []policy.TokenLogprob{{ID: id, Logprob: lp}}
}

// abc answers "ab" then the model's end, and "cd" cut by max_tokens.
var abc = scripted{samples: []policy.Sample{
	{Text: "ab", TokenIDs: []int32{1, 2, 0}, Logprobs: []float32{-0.5, -0.25, -1},
		TopLogprobs: [][]policy.TokenLogprob{tl(1, -0.5), tl(3, -0.125), tl(0, -1)}, FinishReason: policy.FinishStop, PromptTokens: 2},
	{Text: "cd", TokenIDs: []int32{3, 4}, Logprobs: []float32{-2, -4},
		TopLogprobs: [][]policy.TokenLogprob{tl(3, -2), tl(4, -4)}, FinishReason: policy.FinishLength, PromptTokens: 2},
}}

var created = regexp.MustCompile(`"created":[0-9]+,`)

// sameCreated checks that every chunk has the same created time and
// writes it as 0, for exact comparisons.
func sameCreated(t *testing.T, chunks []string) []string {
	t.Helper()
	var first string
	out := make([]string, len(chunks))
	for i, c := range chunks {
		m := created.FindString(c)
		if m == "" || (first != "" && m != first) {
			t.Fatalf("chunk %d: created %q, the first %q", i, m, first)
		}
		first = m
		out[i] = created.ReplaceAllString(c, `"created":0,`)
	}
	return out
}

func sameLines(t *testing.T, got []string, want string) {
	t.Helper()
	if w := strings.Split(strings.TrimSpace(want), "\n"); !reflect.DeepEqual(got, w) {
		t.Errorf("chunks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(w, "\n"))
	}
}

// A completions stream: one chunk per token, the two choices interleaved
// by index, each token's logprobs (text offsets into the whole text) in
// its chunk, finish_reason on each choice's last, then the usage chunk.
func TestStreamCompletionsChunks(t *testing.T) {
	url, _ := serve(t, abc, nil)
	got := sameCreated(t, streamPost(t, url+"/v1/completions",
		`{"prompt": "hi", "n": 2, "logprobs": 1, "return_token_ids": true, "stream": true, "stream_options": {"include_usage": true}}`))
	sameLines(t, got, `
{"id":"cmpl-1","object":"text_completion","created":0,"model":"policy","choices":[{"index":0,"text":"a","logprobs":{"tokens":["a"],"token_logprobs":[-0.5],"top_logprobs":[{"a":-0.5}],"text_offset":[0]},"finish_reason":null,"stop_reason":null,"token_ids":[1]}],"usage":null}
{"id":"cmpl-1","object":"text_completion","created":0,"model":"policy","choices":[{"index":1,"text":"c","logprobs":{"tokens":["c"],"token_logprobs":[-2],"top_logprobs":[{"c":-2}],"text_offset":[0]},"finish_reason":null,"stop_reason":null,"token_ids":[3]}],"usage":null}
{"id":"cmpl-1","object":"text_completion","created":0,"model":"policy","choices":[{"index":0,"text":"b","logprobs":{"tokens":["b"],"token_logprobs":[-0.25],"top_logprobs":[{"c":-0.125,"b":-0.25}],"text_offset":[1]},"finish_reason":null,"stop_reason":null,"token_ids":[2]}],"usage":null}
{"id":"cmpl-1","object":"text_completion","created":0,"model":"policy","choices":[{"index":1,"text":"d","logprobs":{"tokens":["d"],"token_logprobs":[-4],"top_logprobs":[{"d":-4}],"text_offset":[1]},"finish_reason":"length","stop_reason":null,"token_ids":[4]}],"usage":null}
{"id":"cmpl-1","object":"text_completion","created":0,"model":"policy","choices":[{"index":0,"text":"","logprobs":{"tokens":["\u003ceos\u003e"],"token_logprobs":[-1],"top_logprobs":[{"\u003ceos\u003e":-1}],"text_offset":[2]},"finish_reason":"stop","stop_reason":null,"token_ids":[0]}],"usage":null}
{"id":"cmpl-1","object":"text_completion","created":0,"model":"policy","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":5,"total_tokens":7}}
`)
}

// A chat stream: each choice's first delta carries the role, then one
// content delta per token with its logprobs; a stop string that ends the
// text leaves its token an empty delta, and names itself in stop_reason.
// Without include_usage no chunk has usage.
func TestStreamChatChunks(t *testing.T) {
	p := scripted{samples: []policy.Sample{
		{Text: "a", TokenIDs: []int32{1, 0}, Logprobs: []float32{-0.5, -1}, TopLogprobs: [][]policy.TokenLogprob{tl(1, -0.5), tl(0, -1)}, FinishReason: policy.FinishStop},
		{Text: "c", TokenIDs: []int32{3, 4}, Logprobs: []float32{-2, -4}, TopLogprobs: [][]policy.TokenLogprob{tl(3, -2), tl(4, -4)}, FinishReason: policy.FinishStop, StopReason: "d"},
	}}
	url, _ := serve(t, p, &server.Options{Model: "m"})
	got := sameCreated(t, streamPost(t, url+"/v1/chat/completions",
		`{"messages": [{"role": "user", "content": "hi"}], "n": 2, "logprobs": true, "top_logprobs": 1, "stop": "d", "stream": true}`))
	sameLines(t, got, `
{"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"stop_reason":null}]}
{"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":1,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"stop_reason":null}]}
{"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":"a"},"logprobs":{"content":[{"token":"a","logprob":-0.5,"bytes":[97],"top_logprobs":[{"token":"a","logprob":-0.5,"bytes":[97]}]}]},"finish_reason":null,"stop_reason":null}]}
{"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":1,"delta":{"content":"c"},"logprobs":{"content":[{"token":"c","logprob":-2,"bytes":[99],"top_logprobs":[{"token":"c","logprob":-2,"bytes":[99]}]}]},"finish_reason":null,"stop_reason":null}]}
{"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":""},"logprobs":{"content":[{"token":"\u003ceos\u003e","logprob":-1,"bytes":[60,101,111,115,62],"top_logprobs":[{"token":"\u003ceos\u003e","logprob":-1,"bytes":[60,101,111,115,62]}]}]},"finish_reason":"stop","stop_reason":null}]}
{"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":1,"delta":{"content":""},"logprobs":{"content":[{"token":"d","logprob":-4,"bytes":[100],"top_logprobs":[{"token":"d","logprob":-4,"bytes":[100]}]}]},"finish_reason":"stop","stop_reason":"d"}]}
`)
}

// Echo streams the prompt, with its logprobs, as each choice's first
// chunk, then one chunk per token; without a TokenTexter the text is one
// chunk with all its tokens.
func TestStreamEchoAndUnspelled(t *testing.T) {
	url, p := tinyServer(t)
	got := sameCreated(t, streamPost(t, url+"/v1/completions",
		`{"prompt": "12+3=", "max_tokens": 4, "temperature": 0, "echo": true, "logprobs": 0, "return_tokens_as_token_ids": true, "stream": true}`))
	want := inProcess(t, p, policy.Request{Prompt: "12+3="}, policy.Sampling{MaxTokens: 4, Logprobs: true, PromptLogprobs: true})
	var texts, tokens []string
	for i, c := range got {
		var ck struct {
			Choices []struct {
				Text     string
				Logprobs struct {
					Tokens     []string
					TextOffset []int `json:"text_offset"`
				}
			}
		}
		if err := json.Unmarshal([]byte(c), &ck); err != nil {
			t.Fatal(err)
		}
		ch := ck.Choices[0]
		// token_id:N tokens are not text: no offsets.
		if ch.Logprobs.TextOffset != nil {
			t.Errorf("chunk %d: text offsets %v for token_id:N tokens", i, ch.Logprobs.TextOffset)
		}
		texts = append(texts, ch.Text)
		tokens = append(tokens, strings.Join(ch.Logprobs.Tokens, " "))
	}
	spell := func(ids []int32) string {
		var s []string
		for _, id := range ids {
			s = append(s, fmt.Sprintf("token_id:%d", id))
		}
		return strings.Join(s, " ")
	}
	wantTokens := []string{spell(want.Prompt.TokenIDs)}
	for _, id := range want.TokenIDs {
		wantTokens = append(wantTokens, spell([]int32{id}))
	}
	if texts[0] != "12+3=" || strings.Join(texts, "") != "12+3="+want.Text || !reflect.DeepEqual(tokens, wantTokens) {
		t.Errorf("texts %q tokens %q; want the prompt, then %q by token, tokens %q", texts, tokens, want.Text, wantTokens)
	}

	url, _ = serve(t, newDetPolicy("det"), nil)
	got = sameCreated(t, streamPost(t, url+"/v1/completions", `{"prompt": "x", "seed": 3, "max_tokens": 5, "logprobs": 0, "stream": true}`))
	if len(got) != 1 || !strings.Contains(got[0], `"tokens":["token_id:`) {
		t.Errorf("a policy that cannot spell its tokens: %q, want one chunk with all its tokens", got)
	}
}

// spelled is detPolicy with its alphabet as token texts, so that its
// streams are cut per token.
type spelled struct{ *detPolicy }

func (spelled) TokenText(id int32) string { return string(alphabet[id]) }

// A stream carries exactly the non-stream answer: per choice the same
// text, logprobs, token ids, finish and stop reasons, and the same usage,
// for several prompts, n > 1, stop strings, echo, and both endpoints. Its
// chunks interleave the choices by index.
func TestStreamMatchesResponse(t *testing.T) {
	detURL, _ := serve(t, spelled{newDetPolicy("det")}, &server.Options{Model: "det"})
	tinyURL, _ := tinyServer(t)
	chat := `"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "é世 <\"&\">"}]`
	for _, tc := range []struct {
		name, url, path, body string
	}{
		{"det completions", detURL, "/v1/completions", `"prompt": ["one", "two \"é\"", "three"], "n": 3, "seed": 11, "logprobs": 2, "return_token_ids": true`},
		{"det completions stop", detURL, "/v1/completions", `"prompt": ["a", "b"], "n": 4, "seed": 2, "stop": ["e", "h "], "logprobs": 0`},
		{"det echo", detURL, "/v1/completions", `"prompt": "hello ", "n": 2, "seed": 5, "echo": true`},
		{"det chat", detURL, "/v1/chat/completions", chat + `, "n": 3, "seed": 4, "logprobs": true, "top_logprobs": 2, "return_token_ids": true`},
		{"det chat stop", detURL, "/v1/chat/completions", chat + `, "n": 2, "seed": 9, "stop": ["a"], "max_tokens": 8`},
		{"tiny completions echo", tinyURL, "/v1/completions", `"prompt": ["12+30=", "7+8="], "n": 2, "seed": 1, "max_tokens": 6, "logprobs": 3, "echo": true, "stop": ["9"]`},
		{"tiny chat", tinyURL, "/v1/chat/completions", `"messages": [{"role": "user", "content": "77+642="}], "n": 3, "seed": 42, "max_tokens": 5, "logprobs": true, "top_logprobs": 3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isChat := strings.Contains(tc.path, "chat")
			var want map[string]any
			if err := json.Unmarshal(post(t, tc.url+tc.path, "{"+tc.body+"}"), &want); err != nil {
				t.Fatal(err)
			}
			chunks := streamPost(t, tc.url+tc.path, "{"+tc.body+`, "stream": true, "stream_options": {"include_usage": true}}`)
			got, order := reassemble(t, chunks, isChat)
			wantChoices := want["choices"].([]any)
			if !reflect.DeepEqual(got["choices"], wantChoices) {
				a, _ := json.Marshal(got["choices"])
				b, _ := json.Marshal(wantChoices)
				t.Fatalf("streamed choices\n%s\nwant\n%s", a, b)
			}
			if !reflect.DeepEqual(got["usage"], want["usage"]) || got["model"] != want["model"] {
				t.Errorf("usage %v model %v, want %v %v", got["usage"], got["model"], want["usage"], want["model"])
			}
			// Interleaved: round r holds the choices that have an r-th
			// chunk, by index.
			var wantOrder []int
			for r := 0; len(wantOrder) < len(order); r++ {
				for k := range wantChoices {
					if r < counts(order)[k] {
						wantOrder = append(wantOrder, k)
					}
				}
			}
			if !reflect.DeepEqual(order, wantOrder) {
				t.Errorf("choice order %v, want %v", order, wantOrder)
			}
		})
	}
}

func counts(order []int) map[int]int {
	m := map[int]int{}
	for _, k := range order {
		m[k]++
	}
	return m
}

// reassemble joins a stream's chunks into the non-stream answer's
// choices and usage, checking each chunk's shape on the way: the same
// id, model and object throughout, a chat choice's role first and only
// there, finish_reason on a choice's last chunk only, usage null until
// the last chunk. It returns the order of the choices' chunks.
func reassemble(t *testing.T, chunks []string, chat bool) (map[string]any, []int) {
	t.Helper()
	object := "text_completion"
	if chat {
		object = "chat.completion.chunk"
	}
	type acc struct {
		text     string
		lp       map[string]any
		ids      []any
		finish   any
		stop     any
		finished bool
		role     bool
	}
	var choices []*acc
	var order []int
	var id string
	out := map[string]any{}
	for i, raw := range chunks {
		var c map[string]any
		if err := json.Unmarshal([]byte(raw), &c); err != nil {
			t.Fatalf("chunk %d %s: %v", i, raw, err)
		}
		if i == 0 {
			id = c["id"].(string)
		}
		if c["id"] != id || c["object"] != object {
			t.Fatalf("chunk %d: id %v object %v, want %s %s", i, c["id"], c["object"], id, object)
		}
		out["model"] = c["model"]
		u, hasUsage := c["usage"]
		if !hasUsage {
			t.Fatalf("chunk %d lacks usage (include_usage is set)", i)
		}
		chs := c["choices"].([]any)
		if i == len(chunks)-1 {
			if len(chs) != 0 || u == nil {
				t.Fatalf("the last chunk %s is not the usage chunk", raw)
			}
			out["usage"] = u
			break
		}
		if len(chs) != 1 || u != nil {
			t.Fatalf("chunk %d %s: want one choice and null usage", i, raw)
		}
		ch := chs[0].(map[string]any)
		k := int(ch["index"].(float64))
		for len(choices) <= k {
			choices = append(choices, &acc{})
		}
		a := choices[k]
		if a.finished {
			t.Fatalf("chunk %d: choice %d after its finish_reason", i, k)
		}
		if chat {
			d := ch["delta"].(map[string]any)
			if _, ok := d["role"]; ok != !a.role {
				t.Fatalf("chunk %d: delta %v; the role comes in a choice's first delta only", i, d)
			}
			if !a.role {
				a.role = true
				if d["role"] != "assistant" || ch["finish_reason"] != nil {
					t.Fatalf("chunk %d: first delta %v", i, ch)
				}
				order = append(order, k)
				continue
			}
			a.text += d["content"].(string)
		} else {
			a.text += ch["text"].(string)
		}
		order = append(order, k)
		if lp, ok := ch["logprobs"].(map[string]any); ok {
			if a.lp == nil {
				a.lp = map[string]any{}
			}
			for f, v := range lp {
				if v == nil {
					if _, ok := a.lp[f]; !ok {
						a.lp[f] = nil
					}
					continue
				}
				prev, _ := a.lp[f].([]any)
				a.lp[f] = append(prev, v.([]any)...)
			}
		}
		if ids, ok := ch["token_ids"].([]any); ok {
			a.ids = append(a.ids, ids...)
		}
		if ch["finish_reason"] != nil {
			a.finished, a.finish, a.stop = true, ch["finish_reason"], ch["stop_reason"]
		} else if ch["stop_reason"] != nil {
			t.Fatalf("chunk %d: stop_reason before finish_reason", i)
		}
	}
	var list []any
	for k, a := range choices {
		if !a.finished {
			t.Fatalf("choice %d has no finish_reason", k)
		}
		ch := map[string]any{"index": float64(k), "finish_reason": a.finish, "stop_reason": a.stop}
		if chat {
			ch["message"] = map[string]any{"role": "assistant", "content": a.text}
		} else {
			ch["text"] = a.text
		}
		if a.lp != nil {
			ch["logprobs"] = a.lp
		} else {
			ch["logprobs"] = nil
		}
		if a.ids != nil {
			ch["token_ids"] = a.ids
		}
		list = append(list, ch)
	}
	out["choices"] = list
	return out, order
}

// Errors found before the stream starts are JSON errors with their
// status, the same as without stream.
func TestStreamErrorsBeforeStart(t *testing.T) {
	p := newDetPolicy("det")
	p.maxContext = 3
	url, _ := serve(t, p, nil)
	for _, tc := range []struct {
		path, body string
		status     int
		says       string
	}{
		{"/v1/completions", `{"prompt": "too long", "stream": true}`, 400, "context holds 3"},
		{"/v1/completions", `{"prompt": "a", "model": "other", "stream": true}`, 404, "does not exist"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "stream": true, "n": 0}`, 400, "at least 1"},
		{"/v1/completions", `{"prompt": "a", "stream": true, "stream_options": {"include_usage": 1}}`, 400, "stream_options.include_usage"},
	} {
		resp, err := http.Post(url+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil || resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s %s, want a JSON %d", tc.body, resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.status)
			continue
		}
		if msg, _ := apiErr(t, m)["message"].(string); !strings.Contains(msg, tc.says) {
			t.Errorf("%s: message %q does not say %q", tc.body, msg, tc.says)
		}
	}
}

// waitFor fails t unless ch yields within a generous bound: a bound that
// keeps a broken test from hanging, not a timing assertion.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// untilCanceled is a policy whose Generate blocks until its ctx is done
// and reports what ended it.
type untilCanceled struct {
	entered chan struct{}
	ended   chan error
}

func (p *untilCanceled) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	close(p.entered)
	<-ctx.Done()
	p.ended <- ctx.Err()
	return nil, ctx.Err()
}

// watched serves srv and closes returned when its handler has returned.
func watched(t *testing.T, srv http.Handler) (string, <-chan struct{}) {
	t.Helper()
	returned := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(returned)
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, returned
}

// A client that goes away while the policy generates cancels the
// policy's ctx, and the handler returns.
func TestStreamClientGoneDuringGenerate(t *testing.T) {
	p := &untilCanceled{entered: make(chan struct{}), ended: make(chan error, 1)}
	srv, err := server.New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	url, returned := watched(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(`{"prompt": "a", "stream": true}`))
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	waitFor(t, p.entered, "Generate to start")
	cancel()
	if err := waitFor(t, p.ended, "Generate to see the cancellation"); err != context.Canceled {
		t.Errorf("Generate ended with %v, want context.Canceled", err)
	}
	waitFor(t, returned, "the handler to return")
	if err := waitFor(t, answered, "the client"); err == nil {
		t.Error("the canceled request got an answer")
	}
}

// long answers one sample of many tokens.
type long struct{ tokens int }

func (p long) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	smp := policy.Sample{Text: strings.Repeat("a", p.tokens), TokenIDs: make([]int32, p.tokens), FinishReason: policy.FinishLength, Status: policy.StatusOK}
	return [][]policy.Sample{{smp}}, nil
}

func (long) TokenText(int32) string { return "a" }

// counting counts a handler's writes.
type counting struct {
	http.ResponseWriter
	writes *atomic.Int64
}

func (c counting) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.ResponseWriter.Write(b)
}

func (c counting) Flush() { c.ResponseWriter.(http.Flusher).Flush() }

// A client that goes away mid-stream stops the stream: the handler
// returns without writing the rest.
func TestStreamClientGoneMidStream(t *testing.T) {
	const tokens = 300_000 // some 40 MB of chunks, far more than the socket buffers hold
	srv, err := server.New(long{tokens}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int64
	returned := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(returned)
		srv.ServeHTTP(counting{w, &writes}, r)
	}))
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/completions", strings.NewReader(`{"prompt": "a", "stream": true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 64)
	if _, err := io.ReadFull(resp.Body, first); err != nil || !strings.HasPrefix(string(first), "data: {") {
		t.Fatalf("the stream starts %q (%v)", first, err)
	}
	cancel()
	resp.Body.Close()
	waitFor(t, returned, "the handler to return")
	if n := writes.Load(); n >= tokens {
		t.Errorf("the handler wrote %d events of %d after the client left", n, tokens)
	}
}

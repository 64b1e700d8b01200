package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/server"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// tinyServer serves the shipped tiny model and returns its URL and the
// policy, to compare answers with what it gives in process.
func tinyServer(t *testing.T) (string, *tiny.Policy) {
	t.Helper()
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	p := tiny.NewPolicy(m)
	url, _ := serve(t, p, &server.Options{Model: "tiny"})
	return url, p
}

// post sends body and decodes a 200 answer into v, keeping the order of
// object keys out of it (json.Decoder over the raw body is done by the
// caller when order matters).
func post(t *testing.T, url, body string) []byte {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return b
}

// orderedKeys lists the keys of a JSON object in the order they were sent.
func orderedKeys(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(string(raw)))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s is not an object", raw)
	}
	var keys []string
	for d.More() {
		k, _ := d.Token()
		keys = append(keys, k.(string))
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// inProcess is the first sample p generates in process for req.
func inProcess(t *testing.T, p policy.Policy, req policy.Request, s policy.Sampling) policy.Sample {
	t.Helper()
	return inProcessAll(t, p, []policy.Request{req}, s)[0][0]
}

// inProcessAll is what p generates in process for reqs.
func inProcessAll(t *testing.T, p policy.Policy, reqs []policy.Request, s policy.Sampling) [][]policy.Sample {
	t.Helper()
	out, err := p.Generate(context.Background(), reqs, s)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Completions with logprobs: k and echo answer OpenAI's shape with the
// model's exact numbers: the prompt's characters then the completion's,
// the first prompt token without a logprob, each position's k most likely
// tokens as {character: logprob} most likely first, the stop string as
// stop_reason.
func TestCompletionsLogprobsEcho(t *testing.T) {
	url, p := tinyServer(t)
	b := post(t, url+"/v1/completions", `{"prompt": "123+456=", "max_tokens": 6, "temperature": 0, "logprobs": 3, "echo": true, "stop": ["9"]}`)
	var resp struct {
		Choices []struct {
			Text     string
			Logprobs struct {
				Tokens        []string
				TokenLogprobs []*float64        `json:"token_logprobs"`
				TopLogprobs   []json.RawMessage `json:"top_logprobs"`
				TextOffset    []int             `json:"text_offset"`
			}
			FinishReason string `json:"finish_reason"`
			StopReason   any    `json:"stop_reason"`
		}
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	want := inProcess(t, p, policy.Request{Prompt: "123+456="}, policy.Sampling{MaxTokens: 6, Stop: []string{"9"}, Logprobs: true, TopLogprobs: 3, PromptLogprobs: true})
	if ch.Text != "123+456=57" || ch.FinishReason != "stop" || ch.StopReason != "9" {
		t.Fatalf("text %q, finish %q, stop %v; want \"123+456=57\", stop, 9", ch.Text, ch.FinishReason, ch.StopReason)
	}
	lp := ch.Logprobs
	wantTokens := []string{"1", "2", "3", "+", "4", "5", "6", "=", "5", "7", "9"}
	if !reflect.DeepEqual(lp.Tokens, wantTokens) {
		t.Fatalf("tokens %q, want %q", lp.Tokens, wantTokens)
	}
	if !reflect.DeepEqual(lp.TextOffset, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Errorf("text offsets %v", lp.TextOffset)
	}
	if lp.TokenLogprobs[0] != nil || string(lp.TopLogprobs[0]) != "null" {
		t.Errorf("first prompt token: logprob %v, top %s; want null, null", lp.TokenLogprobs[0], lp.TopLogprobs[0])
	}
	np := len(want.Prompt.TokenIDs)
	for i := 1; i < len(wantTokens); i++ {
		var top []policy.TokenLogprob
		var logprob float32
		if i < np {
			top, logprob = want.Prompt.TopLogprobs[i], want.Prompt.Logprobs[i]
		} else {
			top, logprob = want.TopLogprobs[i-np], want.Logprobs[i-np]
		}
		if lp.TokenLogprobs[i] == nil || *lp.TokenLogprobs[i] != float64(logprob) {
			t.Fatalf("token %d: logprob %v, want %v", i, lp.TokenLogprobs[i], logprob)
		}
		var dict map[string]float64
		if err := json.Unmarshal(lp.TopLogprobs[i], &dict); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, a := range top {
			keys = append(keys, p.TokenText(a.ID))
			if dict[p.TokenText(a.ID)] != float64(a.Logprob) {
				t.Fatalf("token %d: top %s, want %v", i, lp.TopLogprobs[i], top)
			}
		}
		if !contains(keys, wantTokens[i]) {
			keys = append(keys, wantTokens[i]) // a sampled token outside the top k is added
		}
		if got := orderedKeys(t, lp.TopLogprobs[i]); !reflect.DeepEqual(got, keys) {
			t.Fatalf("token %d: top keys %q in that order, want %q", i, got, keys)
		}
		if i >= np && keys[0] != wantTokens[i] {
			t.Fatalf("greedy token %d is %q, the most likely %q", i, wantTokens[i], keys[0])
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Chat with logprobs and top_logprobs answers OpenAI's chat shape: per
// token {token, logprob, bytes, top_logprobs: k × {token, logprob, bytes}};
// max_tokens reached is finish_reason length with a null stop_reason.
func TestChatTopLogprobs(t *testing.T) {
	url, p := tinyServer(t)
	b := post(t, url+"/v1/chat/completions", `{"messages": [{"role": "user", "content": "77+642="}], "max_tokens": 2, "temperature": 1, "seed": 42, "n": 2, "logprobs": true, "top_logprobs": 3}`)
	type alt struct {
		Token   string
		Logprob float64
		Bytes   []int
	}
	var resp struct {
		Choices []struct {
			Message  struct{ Content string }
			Logprobs struct {
				Content []struct {
					alt
					TopLogprobs []alt `json:"top_logprobs"`
				}
			}
			FinishReason string `json:"finish_reason"`
			StopReason   any    `json:"stop_reason"`
		}
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	out := inProcessAll(t, p, []policy.Request{{Messages: []policy.Message{{Role: "user", Content: "77+642="}}, Seed: 42}},
		policy.Sampling{N: 2, Temperature: 1, MaxTokens: 2, Logprobs: true, TopLogprobs: 3})
	for j, ch := range resp.Choices {
		want := out[0][j]
		if ch.Message.Content != want.Text || ch.FinishReason != "length" || ch.StopReason != nil {
			t.Fatalf("choice %d: %q, finish %q, stop %v; want %q, length, null", j, ch.Message.Content, ch.FinishReason, ch.StopReason, want.Text)
		}
		for k, c := range ch.Logprobs.Content {
			tok := p.TokenText(want.TokenIDs[k])
			if c.Token != tok || c.Logprob != float64(want.Logprobs[k]) || !reflect.DeepEqual(c.Bytes, []int{int(tok[0])}) {
				t.Fatalf("choice %d token %d: %+v, want %q %v", j, k, c.alt, tok, want.Logprobs[k])
			}
			var got []policy.TokenLogprob
			for _, a := range c.TopLogprobs {
				ids, _ := p.Model().Tokenize(a.Token)
				if len(ids) != 1 || !reflect.DeepEqual(a.Bytes, []int{int(a.Token[0])}) {
					t.Fatalf("choice %d token %d: alternative %+v is not a character", j, k, a)
				}
				got = append(got, policy.TokenLogprob{ID: ids[0], Logprob: float32(a.Logprob)})
			}
			if !reflect.DeepEqual(got, want.TopLogprobs[k]) {
				t.Fatalf("choice %d token %d: top %v, want %v", j, k, got, want.TopLogprobs[k])
			}
		}
	}
}

// return_tokens_as_token_ids keeps vLLM's "token_id:N" in tokens and in
// the alternatives, for clients that map ids themselves (rlpipe's).
func TestTokensAsIDs(t *testing.T) {
	url, _ := tinyServer(t)
	b := post(t, url+"/v1/completions", `{"prompt": "123+456=", "max_tokens": 6, "temperature": 0, "logprobs": 2, "return_tokens_as_token_ids": true}`)
	var resp struct {
		Choices []struct {
			Logprobs struct {
				Tokens      []string
				TopLogprobs []map[string]float64 `json:"top_logprobs"`
				TextOffset  []int                `json:"text_offset"`
			}
		}
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	lp := resp.Choices[0].Logprobs
	if want := []string{"token_id:8", "token_id:10", "token_id:12", "token_id:2"}; !reflect.DeepEqual(lp.Tokens, want) || lp.TextOffset != nil {
		t.Fatalf("tokens %q, offsets %v; want %q and none", lp.Tokens, lp.TextOffset, want)
	}
	for i, d := range lp.TopLogprobs {
		if _, ok := d[lp.Tokens[i]]; !ok || len(d) != 2 {
			t.Fatalf("position %d: top %v lacks %s or has not 2 entries", i, d, lp.Tokens[i])
		}
	}
}

// Echo without logprobs needs nothing from the policy; with them, a
// policy that cannot score prompts says so.
func TestEchoWithoutPromptLogprobs(t *testing.T) {
	url, _ := serve(t, newDetPolicy("det"), &server.Options{Model: "det"})
	b := post(t, url+"/v1/completions", `{"prompt": "hello ", "max_tokens": 3, "seed": 1, "echo": true}`)
	var resp struct{ Choices []struct{ Text string } }
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Choices[0].Text, "hello ") {
		t.Errorf("echoed text %q does not start with the prompt", resp.Choices[0].Text)
	}
	status, body := do(t, "POST", url+"/v1/completions", `{"prompt": "hello ", "echo": true, "logprobs": 1}`)
	if msg, _ := apiErr(t, body)["message"].(string); status != 400 || !strings.Contains(msg, "send echo without logprobs") {
		t.Errorf("echo with logprobs from a policy without prompt logprobs: %d %v", status, body)
	}
}

// With return_token_ids the answer carries the prompt's token ids where
// vLLM puts them: in each choice of a completions answer, at the top of a
// chat answer (the embedded model renders an assistant message followed
// by EOS, id 2). A policy that does not return its prompts' tokens sends
// none, and is not refused.
func TestPromptTokenIDs(t *testing.T) {
	url, _ := tinyServer(t)
	var comp struct {
		Choices []struct {
			PromptTokenIDs []int32 `json:"prompt_token_ids"`
		}
	}
	if err := json.Unmarshal(post(t, url+"/v1/completions", `{"prompt": "12+3=", "n": 2, "max_tokens": 3, "return_token_ids": true}`), &comp); err != nil {
		t.Fatal(err)
	}
	if len(comp.Choices) != 2 || fmt.Sprint(comp.Choices[0].PromptTokenIDs) != "[4 5 13 6 15]" || fmt.Sprint(comp.Choices[1].PromptTokenIDs) != "[4 5 13 6 15]" {
		t.Errorf("completions: %+v", comp.Choices)
	}
	var chat struct {
		PromptTokenIDs []int32 `json:"prompt_token_ids"`
	}
	body := `{"messages": [{"role": "user", "content": "1+2="}, {"role": "assistant", "content": "3"}, {"role": "user", "content": "3+4="}], "max_tokens": 3, "return_token_ids": true}`
	if err := json.Unmarshal(post(t, url+"/v1/chat/completions", body), &chat); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(chat.PromptTokenIDs) != "[4 13 5 15 6 2 6 13 7 15]" {
		t.Errorf("chat: prompt_token_ids %v", chat.PromptTokenIDs)
	}
	durl, _ := serve(t, newDetPolicy("det"), &server.Options{Model: "det"})
	if b := post(t, durl+"/v1/completions", `{"prompt": "hello ", "max_tokens": 3, "seed": 1, "return_token_ids": true}`); strings.Contains(string(b), "prompt_token_ids") {
		t.Errorf("a policy without prompt tokens: %s", b)
	}
}

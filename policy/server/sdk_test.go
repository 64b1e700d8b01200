package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"reflect"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/server"
	"github.com/rlpipe/rlpipe/policy/server/servertest"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// The official openai Python SDK parses the server's answers into the
// fields it documents, with the model's numbers: completions with
// logprobs=3 and echo, chat with top_logprobs=3, stop_reason,
// finish_reason, streams of both read by the SDK's iterator (the same
// text, logprobs, finish reasons and usage as without stream), tool
// calls (tools sent, tool_calls read whole and streamed, the SDK's own
// assistant and tool messages accepted in the next turn), and a 401
// that names what to set (testdata/openai_sdk.py asserts them; this test
// compares its numbers and texts with the model's in process).
func TestOpenAISDK(t *testing.T) {
	python := pyvenv.SDK.Python(t, "check the policy server against the official openai SDK")
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	p := tiny.NewPolicy(m)
	const token = "sdk-test-token"
	_, url := servertest.Serve(t, p, &server.Options{Model: "tiny", Token: token})

	_, toolsURL := servertest.Serve(t, &echoPolicy{}, &server.Options{Model: "echo"})

	run, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(run, python, "testdata/openai_sdk.py", url, "tiny", token, toolsURL)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("testdata/openai_sdk.py: %v\n%s", err, stderr.Bytes())
	}
	var got struct {
		Completions struct {
			TopLogprobs [][][2]any `json:"top_logprobs"`
		}
		Chat [][]struct {
			Token   string
			Logprob float64
			Top     [][2]any
		}
		Stream struct {
			Completions, Chat []string
		}
		Tools map[string]any
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("the script's output %q: %v", stdout.Bytes(), err)
	}

	// The completion's alternatives, after the 8 echoed prompt tokens.
	want := inProcess(t, p, policy.Request{Prompt: "123+456="}, policy.Sampling{MaxTokens: 6, Stop: []string{"9"}, Logprobs: true, TopLogprobs: 3})
	tops := got.Completions.TopLogprobs
	if len(tops) != 8+len(want.TopLogprobs) {
		t.Fatalf("%d positions of top_logprobs, want 8 + %d", len(tops), len(want.TopLogprobs))
	}
	for k, alts := range want.TopLogprobs {
		sameTop(t, "completion position", k, tops[8+k], alts, p)
	}
	out := inProcessAll(t, p, []policy.Request{{Messages: []policy.Message{{Role: "user", Content: "77+642="}}, Seed: 42}},
		policy.Sampling{N: 2, Temperature: 1, MaxTokens: 2, Logprobs: true, TopLogprobs: 3})
	for j, content := range got.Chat {
		smp := out[0][j]
		for k, tok := range content {
			if tok.Token != p.TokenText(smp.TokenIDs[k]) || tok.Logprob != float64(smp.Logprobs[k]) {
				t.Fatalf("chat choice %d token %d: %q %v, want %q %v", j, k, tok.Token, tok.Logprob, p.TokenText(smp.TokenIDs[k]), smp.Logprobs[k])
			}
			sameTop(t, "chat position", k, tok.Top, smp.TopLogprobs[k], p)
		}
	}
	// The streams' texts, joined by the SDK, are the model's samples.
	out = inProcessAll(t, p, []policy.Request{{Prompt: "12+30=", Seed: 7}, {Prompt: "7+8=", Seed: 7}},
		policy.Sampling{N: 2, Temperature: 1, MaxTokens: 6, Logprobs: true, TopLogprobs: 1})
	var texts []string
	for _, ss := range out {
		for _, smp := range ss {
			texts = append(texts, smp.Text)
		}
	}
	if !reflect.DeepEqual(got.Stream.Completions, texts) {
		t.Errorf("the completions stream's texts %q, want the model's %q", got.Stream.Completions, texts)
	}
	out = inProcessAll(t, p, []policy.Request{{Messages: []policy.Message{{Role: "user", Content: "77+642="}}, Seed: 42}},
		policy.Sampling{N: 2, Temperature: 1, MaxTokens: 5, Logprobs: true, TopLogprobs: 2})
	if want := []string{out[0][0].Text, out[0][1].Text}; !reflect.DeepEqual(got.Stream.Chat, want) {
		t.Errorf("the chat stream's texts %q, want the model's %q", got.Stream.Chat, want)
	}

	// The SDK's tools: the calls read whole and streamed, and a transcript
	// with the SDK's own assistant message and a tool message accepted.
	id := callID(5, 0, 0)
	wantTools := map[string]any{"content": "I will look.", "id": id, "name": "bash", "arguments": `{"cmd":"ls"}`,
		"stream_finish": "tool_calls", "stream": []any{"I will look.", []any{id, "bash", `{"cmd":"ls"}`}},
		"after_tool": []any{"a.txt", "stop"}}
	if !reflect.DeepEqual(got.Tools, wantTools) {
		t.Errorf("the SDK's tool calls: %v\nwant %v", got.Tools, wantTools)
	}
}

// sameTop fails t unless the SDK's [token, logprob] pairs are the
// policy's alternatives, in order, to the bit.
func sameTop(t *testing.T, what string, k int, got [][2]any, want []policy.TokenLogprob, p *tiny.Policy) {
	t.Helper()
	if len(got) < len(want) {
		t.Fatalf("%s %d: %v, want %v", what, k, got, want)
	}
	for i, a := range want {
		tok, _ := got[i][0].(string)
		lp, _ := got[i][1].(float64)
		if tok != p.TokenText(a.ID) || lp != float64(a.Logprob) {
			t.Fatalf("%s %d: alternative %d is %v, want %q %v", what, k, i, got[i], p.TokenText(a.ID), a.Logprob)
		}
	}
}

package chattemplate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// The special tokens of the test tokenizer, after its 256 byte tokens.
const (
	endOfText int32 = 256 + iota
	imStart
	imEnd
	thinkOpen
	thinkClose
)

var specials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"}

// byteChars is GPT-2's byte-level alphabet: the character tokenizer.json
// spells byte b with.
func byteChars() [256]rune {
	var out [256]rune
	used := map[int]bool{}
	for _, r := range [][2]int{{'!', '~'}, {0xA1, 0xAC}, {0xAE, 0xFF}} {
		for b := r[0]; b <= r[1]; b++ {
			out[b], used[b] = rune(b), true
		}
	}
	n := 0
	for b := 0; b < 256; b++ {
		if !used[b] {
			out[b] = rune(256 + n)
			n++
		}
	}
	return out
}

// writeTokenizer writes a byte-level Hugging Face tokenizer (every byte a
// token, id = the byte; Qwen's chat markers and <think> as special
// tokens after them) into dir, with a tokenizer_config.json naming its
// special tokens and, when template is not "", its chat template.
func writeTokenizer(t testing.TB, dir, template string) {
	t.Helper()
	vocab := map[string]int{}
	for b, r := range byteChars() {
		vocab[string(r)] = b
	}
	var added []map[string]any
	for i, s := range specials {
		added = append(added, map[string]any{"id": 256 + i, "content": s, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true})
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}
	tok := map[string]any{"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added, "normalizer": nil,
		"pre_tokenizer": byteLevel, "post_processor": nil, "decoder": byteLevel,
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": []string{}}}
	cfg := map[string]any{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
	if template != "" {
		cfg["chat_template"] = template
	}
	for name, v := range map[string]any{"tokenizer.json": tok, "tokenizer_config.json": cfg} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// decode spells the test tokenizer's ids.
func decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		if id >= 256 {
			b.WriteString(specials[id-256])
		} else {
			b.WriteByte(byte(id))
		}
	}
	return b.String()
}

// qwen3Template is the path of Qwen3's chat template as TRL ships it in
// .venv-py: the template that drops <think> from earlier replies.
func qwen3Template(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(pyvenv.Py.Dir(pyvenv.Root(t)))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := filepath.Glob(filepath.Join(dir, "lib", "python3*", "site-packages", "trl", "chat_templates", "qwen3.jinja"))
	if len(m) == 0 {
		t.Skipf("no trl/chat_templates/qwen3.jinja in %s: run make deps", dir)
	}
	return m[0]
}

// The package's tests share one worker of Qwen3's template (a Python
// start is seconds on a busy machine); TestMain stops it.
var shared struct {
	once sync.Once
	r    *Renderer
	err  error
}

func qwen3(t *testing.T) *Renderer {
	t.Helper()
	py := pyvenv.Python(t, "render Qwen3's chat template")
	tpl := qwen3Template(t)
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "rlpipe-chattemplate-")
		if err != nil {
			shared.err = err
			return
		}
		writeTokenizer(t, dir, "")
		shared.r, shared.err = Start(context.Background(), &Options{Python: py, Tokenizer: dir, Template: tpl})
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.r
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.r != nil {
		shared.r.Close()
		os.RemoveAll(shared.r.o.Tokenizer)
	}
	os.Exit(code)
}

// thinker is a thinking model behind a vLLM-like server: a chat request
// is rendered with the template and tokenized (vLLM's chat path), a
// request of token ids is continued as it is; every reply thinks first
// and ends with <|im_end|>, the text without it as vLLM returns it.
type thinker struct{ r *Renderer }

func (p thinker) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	out := make([][]policy.Sample, len(reqs))
	for i, req := range reqs {
		prompt := req.PromptTokenIDs
		if prompt == nil {
			text, err := p.r.Render(ctx, req.Messages, req.Tools, true)
			if err != nil {
				return nil, err
			}
			if prompt, err = p.r.Encode(ctx, text); err != nil {
				return nil, err
			}
		}
		turn := (strings.Count(decode(prompt), "<|im_end|>") - 1) / 2
		text := fmt.Sprintf("<think>\nturn %d: count down\n</think>\n\nnext", turn)
		ids, err := p.r.Encode(ctx, text)
		if err != nil {
			return nil, err
		}
		out[i] = []policy.Sample{{RequestID: req.ID, Text: text, TokenIDs: append(ids, imEnd), FinishReason: policy.FinishStop,
			Prompt: &policy.PromptLogprobs{TokenIDs: prompt}, PolicyVersion: "thinker", Status: policy.StatusOK}}
	}
	return out, nil
}

// countdown ends after steps steps, answering each with the steps left.
type countdown struct{ steps, left int }

func (c *countdown) Reset(context.Context, string) (string, error) {
	c.left = c.steps
	return "go", nil
}
func (c *countdown) Step(context.Context, string) (environments.Step, error) {
	c.left--
	return environments.Step{Observation: fmt.Sprintf("%d left", c.left), Done: c.left == 0}, nil
}
func (c *countdown) End() error { return nil }

// An episode of a thinking model under Qwen3's template: sent as chat
// messages, the second turn's prompt no longer holds the first reply's
// <think> block, and the episode has no exact token sequence (what
// advantages.Join masks as "no exact token sequence"); run
// token-in/token-out with this package's Renderer, its sequence is
// exactly what the policy read and wrote — the first reply's thinking
// kept — and its mask covers the replies' tokens only: what a trainer
// trains on.
func TestQwen3EpisodeTrainsTokenIn(t *testing.T) {
	r := qwen3(t)
	want := "<|im_start|>user\ngo<|im_end|>\n<|im_start|>assistant\n" +
		"<think>\nturn 0: count down\n</think>\n\nnext<|im_end|>" +
		"\n<|im_start|>user\n1 left<|im_end|>\n<|im_start|>assistant\n" +
		"<think>\nturn 1: count down\n</think>\n\nnext<|im_end|>"
	for _, c := range []struct {
		name      string
		tokenIn   bool
		unaligned string
	}{
		{name: "chat messages", unaligned: "the prompt of turn 1 does not begin with the 50 tokens of the turns before it (they differ at token 21): the policy's template or tokenizer rewrote the earlier turns"},
		{name: "token-in/token-out", tokenIn: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := &environments.RunnerOptions{MaxTurns: 4, Sampling: policy.Sampling{Temperature: 1, MaxTokens: 64, PromptLogprobs: true}}
			if c.tokenIn {
				o.Renderer = r
			}
			runner, err := environments.NewRunner(thinker{r}, o)
			if err != nil {
				t.Fatal(err)
			}
			res, err := runner.Run(context.Background(), &countdown{steps: 2}, environments.Episode{ID: "e"})
			if err != nil {
				t.Fatal(err)
			}
			tr := res.Trajectory
			if res.Unaligned != c.unaligned || tr.Status != tables.StatusOK {
				t.Fatalf("status %s, unaligned %q\nwant ok, %q", tr.Status, res.Unaligned, c.unaligned)
			}
			if !c.tokenIn {
				if tr.Sequence != nil {
					t.Errorf("an unaligned episode has a sequence: %q", decode(tr.Sequence))
				}
				return
			}
			if got := decode(tr.Sequence); got != want {
				t.Errorf("sequence\n%q\nwant\n%q", got, want)
			}
			var trained []int32
			for i, m := range tr.Trainable {
				if m == 1 {
					trained = append(trained, tr.Sequence[i])
				}
			}
			if !slices.Equal(trained, tr.TokenIDs) || len(tr.TokenIDs) != 58 {
				t.Errorf("the trainable tokens %q are not the replies' %q (58 tokens)", decode(trained), decode(tr.TokenIDs))
			}
		})
	}
}

// Suffix after a reply renders the template's end of that reply, less the
// end-of-turn token it sampled, the new messages and the generation
// prompt; a reply cut short gets the template's end of turn.
func TestSuffix(t *testing.T) {
	r := qwen3(t)
	ctx := context.Background()
	history := []policy.Message{{Role: "user", Content: "go"}, {Role: "assistant", Content: "<think>\nhm\n</think>\n\nnext"}}
	obs := []policy.Message{{Role: "user", Content: "1 left"}}
	for _, c := range []struct {
		name  string
		reply []int32
		want  string
	}{
		{name: "reply ended with its end-of-turn token", reply: []int32{'n', imEnd},
			want: "\n<|im_start|>user\n1 left<|im_end|>\n<|im_start|>assistant\n"},
		{name: "reply cut short", reply: []int32{'n'},
			want: "<|im_end|>\n<|im_start|>user\n1 left<|im_end|>\n<|im_start|>assistant\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := r.Suffix(ctx, history, c.reply, obs, nil)
			if err != nil || decode(got) != c.want {
				t.Fatalf("Suffix = %q, %v\nwant %q", decode(got), err, c.want)
			}
		})
	}
}

// Bad setups fail at Start, naming the directory or the worker's first
// line and the next step; no Python starts for the first two.
func TestStartFaults(t *testing.T) {
	noTokenizer := t.TempDir()
	garbage := filepath.Join(t.TempDir(), "python")
	if err := os.WriteFile(garbage, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tok := t.TempDir()
	writeTokenizer(t, tok, "")
	for _, c := range []struct {
		name   string
		o      Options
		python bool
		want   string
		is     error
	}{
		{name: "no tokenizer.json", o: Options{Python: "python3", Tokenizer: noTokenizer},
			want: "chattemplate: start: the tokenizer directory " + noTokenizer + " has no tokenizer.json: stat " + noTokenizer + "/tokenizer.json: no such file or directory; name the model's directory (its Hugging Face snapshot)"},
		{name: "garbage on the protocol stream", o: Options{Python: garbage, Tokenizer: tok},
			want: `chattemplate: start: chat template worker failed: environment infrastructure failure: its first line "hello\n" is not {"ready": true}`,
			is:   environments.ErrInfra},
		{name: "no chat template", o: Options{Tokenizer: tok}, python: true,
			want: "chattemplate: start: load the tokenizer " + tok + " and its template: ValueError: " + tok + " has no chat template (tokenizer_config.json's chat_template or chat_template.jinja); name a template file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.python {
				c.o.Python = pyvenv.Python(t, "start the chat template worker")
			}
			r, err := Start(context.Background(), &c.o)
			if err == nil {
				r.Close()
				t.Fatal("Start succeeded")
			}
			if err.Error() != c.want || (c.is != nil && !errors.Is(err, c.is)) {
				t.Fatalf("Start = %v\nwant %s", err, c.want)
			}
		})
	}
}

// A template that raises fails the turn as ErrTemplate, which ends the
// episode env_error naming it; a worker killed between calls fails the
// next call as ErrWorker (infra_error) and is started again at the one
// after, which renders as before.
func TestWorkerFaults(t *testing.T) {
	py := pyvenv.Python(t, "start the chat template worker")
	tok := t.TempDir()
	writeTokenizer(t, tok, `{%- for m in messages %}{%- if m.content == "boom" %}{{ raise_exception("cannot render boom") }}{%- endif %}`+
		`{{ "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n" }}{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}`)
	r, err := Start(context.Background(), &Options{Python: py, Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	_, err = r.Suffix(ctx, nil, nil, []policy.Message{{Role: "user", Content: "boom"}}, nil)
	if want := "chat template cannot render the turn: TemplateError: cannot render boom"; err == nil || err.Error() != want || !errors.Is(err, ErrTemplate) || errors.Is(err, environments.ErrInfra) {
		t.Fatalf("a raising template: %v\nwant %s", err, want)
	}
	runner, err := environments.NewRunner(thinker{r}, &environments.RunnerOptions{Renderer: r})
	if err != nil {
		t.Fatal(err)
	}
	res, err := runner.Run(ctx, &boom{}, environments.Episode{ID: "b"})
	if err != nil || res.Trajectory.Status != tables.StatusEnvError || *res.Trajectory.Error != "render turn 0: chat template cannot render the turn: TemplateError: cannot render boom" {
		t.Fatalf("episode: %v, %s %v", err, res.Trajectory.Status, res.Trajectory.Error)
	}

	r.mu.Lock()
	r.w.cmd.Process.Kill()
	r.mu.Unlock()
	_, err = r.Encode(ctx, "hi")
	if want := "chat template worker failed: environment infrastructure failure: it exited (signal: killed)"; err == nil || err.Error() != want || !errors.Is(err, environments.ErrInfra) {
		t.Fatalf("a killed worker: %v\nwant %s", err, want)
	}
	ids, err := r.Encode(ctx, "hi<|im_end|>")
	if err != nil || !slices.Equal(ids, []int32{'h', 'i', imEnd}) {
		t.Fatalf("after a restart: %v, %v", ids, err)
	}
}

// boom's first observation makes the test template raise.
type boom struct{}

func (boom) Reset(context.Context, string) (string, error) { return "boom", nil }
func (boom) Step(context.Context, string) (environments.Step, error) {
	return environments.Step{Done: true}, nil
}
func (boom) End() error { return nil }

// lookup offers one tool and ends after the first reply.
type lookup struct{}

var lookupTools = []toolcall.Tool{{Type: "function", Function: toolcall.Function{Name: "lookup", Description: "Find a word.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"word":{"type":"string"}},"required":["word"]}`)}}}

func (lookup) Tools() []toolcall.Tool                        { return lookupTools }
func (lookup) Reset(context.Context, string) (string, error) { return "go", nil }
func (lookup) Step(context.Context, string) (environments.Step, error) {
	return environments.Step{Done: true}, nil
}
func (lookup) End() error { return nil }

// recorder is the thinker, keeping the requests it was sent.
type recorder struct {
	thinker
	reqs []policy.Request
}

func (p *recorder) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	p.reqs = append(p.reqs, reqs...)
	return p.thinker.Generate(ctx, reqs, s)
}

// An environment offering tools, run token-in/token-out under Qwen3's
// template, shows the model its tools: the first prompt's tokens hold
// the template's tools block, as the chat path would render it, and the
// request carries no tools apart (a completions request has none).
func TestTokenInShowsTools(t *testing.T) {
	r := qwen3(t)
	p := &recorder{thinker: thinker{r}}
	runner, err := environments.NewRunner(p, &environments.RunnerOptions{MaxTurns: 2, Renderer: r,
		Sampling: policy.Sampling{Temperature: 1, MaxTokens: 64, PromptLogprobs: true}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := runner.Run(context.Background(), lookup{}, environments.Episode{ID: "e"})
	if err != nil || res.Trajectory.Status != tables.StatusOK {
		t.Fatalf("Run = status %s, %v", res.Trajectory.Status, err)
	}
	if len(p.reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(p.reqs))
	}
	req := p.reqs[0]
	if req.Tools != nil || req.Messages != nil {
		t.Errorf("the token-in request carries tools %v and messages %v, want neither", req.Tools, req.Messages)
	}
	want := "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
		`{"type": "function", "function": {"name": "lookup", "description": "Find a word.", "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}}` +
		"\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
		"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\ngo<|im_end|>\n<|im_start|>assistant\n"
	if got := decode(req.PromptTokenIDs); got != want {
		t.Errorf("first prompt\n%q\nwant\n%q", got, want)
	}
}

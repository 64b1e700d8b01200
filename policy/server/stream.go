package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/rlpipe/rlpipe/policy"
)

// Streaming. policy.Policy returns whole samples, so a stream: true
// answer is cut from the finished samples, one chunk per token: the
// chunks carry exactly the non-stream answer (the same text, logprobs,
// finish and stop reasons, usage), but they all arrive once the policy is
// done. Streaming is for clients that ask for it, not for a first token
// sooner. Since every failure of the policy is known before the first
// byte, it is an ordinary JSON error with its status; only a chunk that
// cannot be encoded ends a started stream with an error event.

// Chunk bodies, in OpenAI's shapes: a completions chunk (object
// text_completion) has choices[].text, a chat chunk (object
// chat.completion.chunk) choices[].delta.
type (
	chunk struct {
		ID      string        `json:"id"`
		Object  string        `json:"object"`
		Created int64         `json:"created"`
		Model   string        `json:"model"`
		Choices []chunkChoice `json:"choices"`
		// Usage is left out without stream_options.include_usage; with
		// it, null on every chunk but the last, which has the totals
		// and no choices, as OpenAI's API answers.
		Usage any `json:"usage,omitempty"`
	}
	chunkChoice struct {
		Index        int     `json:"index"`
		Text         *string `json:"text,omitempty"`  // completions
		Delta        *delta  `json:"delta,omitempty"` // chat
		Logprobs     any     `json:"logprobs"`        // the chunk's tokens' *textLogprobs or *chatLogprobs, or nil
		FinishReason any     `json:"finish_reason"`   // null until the choice's last chunk
		StopReason   any     `json:"stop_reason"`     // vLLM's, on the last chunk
		TokenIDs     []int32 `json:"token_ids,omitempty"`
	}
	delta struct {
		Role    string  `json:"role,omitempty"` // the first chunk of a chat choice
		Content *string `json:"content,omitempty"`
		// ToolCalls: a choice's calls, all in its last chunk (tools.go).
		ToolCalls []streamCall `json:"tool_calls,omitempty"`
	}
)

// jsonNull is the usage of a chunk before the last with include_usage.
var jsonNull = json.RawMessage("null")

// part is what one chunk of a choice carries: its text and the range of
// the choice's logprobs positions and token ids.
type part struct {
	text       string
	pos0, pos1 int          // positions of the choice's logprobs (echoed prompt first)
	id0, id1   int          // indexes into the sample's TokenIDs
	calls      []streamCall // the choice's tool calls, in place of text
}

// parts cuts a choice into its chunks: with echo the prompt and its
// logprobs first, then one part per token of the sample. The texts add up
// to the choice's text, and the positions and ids to its logprobs and
// token ids.
func parts(smp *policy.Sample, ch *choice, prompt string, echo bool, tt policy.TokenTexter) []part {
	npos, ncomp := 0, 0
	switch lp := ch.Logprobs.(type) {
	case *textLogprobs:
		npos, ncomp = len(lp.Tokens), len(smp.Logprobs)
	case *chatLogprobs:
		npos, ncomp = len(lp.Content), len(smp.Logprobs)
	}
	var out []part
	at := 0
	if echo {
		at = max(npos-ncomp, 0)
		out = append(out, part{text: prompt, pos1: at})
	}
	pieces := pieces(smp.Text, smp.TokenIDs, tt)
	nid := len(smp.TokenIDs)
	for k, text := range pieces {
		out = append(out, part{text: text,
			pos0: min(at+k, npos), pos1: min(at+k+1, npos),
			id0: min(k, nid), id1: min(k+1, nid)})
	}
	last := &out[len(out)-1]
	last.pos1, last.id1 = npos, nid
	return out
}

// pieces cuts a sample's text into one piece per token, which add up to
// the text exactly. A token whose spelling the text continues with is
// that piece; one it does not (a special token such as <eos>, which adds
// no text) is empty, and the last token takes whatever text is left (the
// part of it before a stop string). A piece that would end inside a UTF-8
// character leaves its bytes to the next, so every piece is valid text.
// Without a TokenTexter, or without token ids, the text is one piece.
func pieces(text string, ids []int32, tt policy.TokenTexter) []string {
	if tt == nil || len(ids) == 0 {
		return []string{text}
	}
	out := make([]string, len(ids))
	start, end := 0, 0 // start: where the next piece begins; end: where its token's text ends
	for k, id := range ids {
		if tok := tt.TokenText(id); strings.HasPrefix(text[end:], tok) {
			end += len(tok)
		}
		if k == len(ids)-1 {
			end = len(text)
		}
		cut := end
		for cut > start && cut < len(text) && !utf8.RuneStart(text[cut]) {
			cut--
		}
		out[k] = text[start:cut]
		start = cut
	}
	return out
}

// sliceLogprobs is the logprobs of positions [a, b) of a choice's.
func sliceLogprobs(lp any, a, b int) any {
	switch l := lp.(type) {
	case *textLogprobs:
		out := &textLogprobs{Tokens: l.Tokens[a:b], TokenLogprobs: l.TokenLogprobs[a:b], TopLogprobs: l.TopLogprobs[a:b]}
		if l.TextOffset != nil {
			out.TextOffset = l.TextOffset[a:b]
		}
		return out
	case *chatLogprobs:
		return &chatLogprobs{Content: l.Content[a:b]}
	}
	return nil
}

// stream answers a stream: true request whose samples are all OK with
// text/event-stream: data: {chunk} events, the choices' chunks
// interleaved by index (a chat choice's first carries the role), with
// include_usage a last chunk of usage, then data: [DONE]. It stops as soon
// as the client is gone.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, out [][]policy.Sample, c *call, chat bool) {
	resp := s.response(out, c, chat)
	ck := chunk{ID: resp.ID, Object: "text_completion", Created: resp.Created, Model: resp.Model, Choices: make([]chunkChoice, 1)}
	if chat {
		ck.Object = "chat.completion.chunk"
	}
	if c.includeUsage {
		ck.Usage = jsonNull
	}
	tt, _ := s.p.(policy.TokenTexter)
	n := c.sampling.Samples()
	all := make([][]part, len(resp.Choices))
	rounds := 0
	for k := range resp.Choices {
		i := k / n
		all[k] = parts(&out[i][k%n], &resp.Choices[k], c.reqs[i].Prompt, c.echo, tt)
		if m := resp.Choices[k].Message; m != nil && m.ToolCalls != nil {
			all[k] = withCalls(all[k], m.Content, m.ToolCalls)
		}
		rounds = max(rounds, len(all[k]))
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // no proxy buffering
	w.WriteHeader(http.StatusOK)
	ev := newEvents(w, r.Context())
	send := func(cc chunkChoice) bool {
		ck.Choices[0] = cc
		return ev.send(&ck)
	}
	if chat {
		empty := ""
		for k := range all {
			if !send(chunkChoice{Index: k, Delta: &delta{Role: "assistant", Content: &empty}}) {
				s.streamEnded(r, ev)
				return
			}
		}
		ev.flush()
	}
	for t := 0; t < rounds; t++ {
		for k, ps := range all {
			if t >= len(ps) {
				continue
			}
			ch, p := &resp.Choices[k], &ps[t]
			cc := chunkChoice{Index: k}
			switch {
			case p.calls != nil:
				cc.Delta = &delta{ToolCalls: p.calls}
			case chat:
				cc.Delta = &delta{Content: &p.text}
			default:
				cc.Text = &p.text
			}
			if ch.Logprobs != nil {
				cc.Logprobs = sliceLogprobs(ch.Logprobs, p.pos0, p.pos1)
			}
			if c.tokenIDs && p.id1 > p.id0 {
				smp := &out[k/n][k%n]
				cc.TokenIDs = smp.TokenIDs[p.id0:p.id1]
			}
			if t == len(ps)-1 {
				cc.FinishReason, cc.StopReason = ch.FinishReason, ch.StopReason
			}
			if !send(cc) {
				s.streamEnded(r, ev)
				return
			}
		}
		ev.flush()
	}
	if c.includeUsage {
		ck.Choices, ck.Usage = []chunkChoice{}, &resp.Usage
		if !ev.send(&ck) {
			s.streamEnded(r, ev)
			return
		}
	}
	ev.done()
}

// streamEnded logs why a stream stopped before its end.
func (s *Server) streamEnded(r *http.Request, ev *events) {
	s.log.Debug().Str(logPath, r.URL.Path).Str(logError, ev.err.Error()).Msg("stream ended early")
}

// events writes server-sent events, data: JSON\n\n. After its first
// failure (the client gone, a write that failed, a chunk that could not
// be encoded) it writes nothing more.
type events struct {
	w   http.ResponseWriter
	f   http.Flusher // nil when w cannot flush
	ctx context.Context
	err error // the first failure
}

func newEvents(w http.ResponseWriter, ctx context.Context) *events {
	f, _ := w.(http.Flusher)
	return &events{w: w, f: f, ctx: ctx}
}

// send writes v as an event and reports whether the stream goes on. A v
// that cannot be encoded ends the stream with an error event, OpenAI's
// data: {"error": {...}}, and data: [DONE], as vLLM does.
func (e *events) send(v any) bool {
	if e.err != nil {
		return false
	}
	if e.err = e.ctx.Err(); e.err != nil {
		return false
	}
	b, err := json.Marshal(v)
	if err != nil {
		e.fail(errInternal(fmt.Sprintf("encode a stream chunk: %v", err)))
		return false
	}
	return e.write(b)
}

func (e *events) write(data []byte) bool {
	if e.err != nil {
		return false
	}
	buf := make([]byte, 0, len(data)+8)
	buf = append(append(append(buf, "data: "...), data...), "\n\n"...)
	if _, err := e.w.Write(buf); err != nil {
		e.err = err
		return false
	}
	return true
}

// fail ends the stream with an error event and [DONE].
func (e *events) fail(ae *apiError) {
	b, err := json.Marshal(struct {
		Error *apiError `json:"error"`
	}{ae})
	if err != nil {
		b = []byte(`{"error": {"message": "the policy server failed to encode an error", "type": "server_error", "param": null, "code": null}}`)
	}
	e.write(b)
	e.done()
	if e.err == nil {
		e.err = ae
	}
}

// done writes the stream's end, data: [DONE], and flushes.
func (e *events) done() {
	e.write([]byte("[DONE]"))
	e.flush()
}

func (e *events) flush() {
	if e.err == nil && e.f != nil {
		e.f.Flush()
	}
}

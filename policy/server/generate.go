package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// body is a completions or chat request: the fields rlpipe's client and
// vLLM's clients send. Unknown fields are ignored, as vLLM does.
type body struct {
	Model    string           `json:"model"`
	Prompt   json.RawMessage  `json:"prompt"`   // completions: a string, a list of strings, token ids or lists of them
	Messages []policy.Message `json:"messages"` // chat
	N        *int             `json:"n"`
	Seed     *int64           `json:"seed"`
	// Temperature defaults to 1 as in OpenAI's API; 0 samples greedily.
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"` // chat's newer name
	Stop                json.RawMessage `json:"stop"`                  // a string or a list of strings
	Logprobs            json.RawMessage `json:"logprobs"`              // completions: an integer; chat: a boolean
	TopLogprobs         *int            `json:"top_logprobs"`
	TokensAsIDs         bool            `json:"return_tokens_as_token_ids"`
	ReturnTokenIDs      bool            `json:"return_token_ids"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	Echo                bool            `json:"echo"`
	// Tools and ToolChoice: chat only (tools.go).
	Tools      []toolcall.Tool `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	// ResponseFormat: only {"type": "text"}, what the server samples
	// anyway; a JSON mode or schema is refused, not ignored.
	ResponseFormat json.RawMessage `json:"response_format"`
}

// chatRoles are the message roles a chat request may use: OpenAI's.
var chatRoles = []string{"system", "developer", "user", "assistant", "tool"}

// responseFormat accepts a response_format that asks for free text
// (absent, null or {"type": "text"}) and refuses any other with a 400
// naming the field.
func responseFormat(raw json.RawMessage) *apiError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var f struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return badRequest("response_format", "response_format must be an object such as {\"type\": \"text\"}, got %s", raw)
	}
	if f.Type != "text" {
		return badRequest("response_format", "response_format type %q is not supported: this server samples free text and enforces no JSON mode or schema; leave response_format out or send {\"type\": \"text\"}", f.Type)
	}
	return nil
}

// checkRoles refuses a message whose role is not one of chatRoles,
// naming its index.
func checkRoles(msgs []policy.Message) *apiError {
	for i, m := range msgs {
		if !slices.Contains(chatRoles, m.Role) {
			return badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d].role is %q: use one of %s", i, m.Role, strings.Join(chatRoles, ", "))
		}
	}
	return nil
}

// streamOptions are OpenAI's stream_options.
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// call is a checked request, ready for the policy.
type call struct {
	model    string // as the response names it
	reqs     []policy.Request
	sampling policy.Sampling
	tokenIDs bool // choices[].token_ids
	asIDs    bool // logprobs' tokens as "token_id:N"
	echo     bool // completions: the prompt before the text and its logprobs
	stream   bool // answer text/event-stream
	// includeUsage ends a stream with a chunk of usage.
	includeUsage bool
	// parseCalls: chat with tools offered and tool_choice auto; each
	// choice's tool calls are parsed from its text (tools.go).
	parseCalls bool
}

// parse checks a body and builds the policy call.
func (s *Server) parse(b *body, chat bool) (*call, *apiError) {
	if b.StreamOptions != nil && !b.Stream {
		return nil, badRequest("stream_options", "stream_options is only allowed with stream: true")
	}
	if b.Echo && chat {
		return nil, badRequest("echo", "echo is for /v1/completions; a chat request cannot echo its messages")
	}
	if e := responseFormat(b.ResponseFormat); e != nil {
		return nil, e
	}
	c := &call{tokenIDs: b.ReturnTokenIDs, asIDs: b.TokensAsIDs, echo: b.Echo, stream: b.Stream,
		includeUsage: b.StreamOptions != nil && b.StreamOptions.IncludeUsage}
	var e *apiError
	if c.model, c.sampling.Adapter, e = s.model(b.Model); e != nil {
		return nil, e
	}
	n := 1
	if b.N != nil {
		n = *b.N
	}
	if n < 1 {
		return nil, badRequest("n", "n is %d; it must be at least 1", n)
	}
	c.sampling.N = n
	c.sampling.Temperature = 1
	if b.Temperature != nil {
		c.sampling.Temperature = *b.Temperature
	}
	if c.sampling.Temperature < 0 {
		return nil, badRequest("temperature", "temperature is %g; it must be ≥ 0 (0 samples greedily)", c.sampling.Temperature)
	}
	if b.TopP != nil {
		if p := *b.TopP; p <= 0 || p > 1 {
			return nil, badRequest("top_p", "top_p is %g; it must be in (0, 1]", p)
		}
		c.sampling.TopP = *b.TopP
	}
	if b.MaxTokens == nil {
		b.MaxTokens = b.MaxCompletionTokens
	}
	if b.MaxTokens != nil {
		if *b.MaxTokens < 0 {
			return nil, badRequest("max_tokens", "max_tokens is %d; it must be ≥ 1, or left out for the policy's default", *b.MaxTokens)
		}
		c.sampling.MaxTokens = *b.MaxTokens
	}
	if c.sampling.Stop, e = strings1("stop", b.Stop); e != nil {
		return nil, e
	}
	if c.sampling.Logprobs, c.sampling.TopLogprobs, e = logprobs(b.Logprobs, b.TopLogprobs, chat); e != nil {
		return nil, e
	}
	// The prompt's logprobs are wanted for echo with logprobs; its token
	// ids, which come with them, for return_token_ids too.
	c.sampling.PromptLogprobs = c.echo && c.sampling.Logprobs || c.tokenIDs
	seed := rand.Int64()
	if b.Seed != nil {
		seed = *b.Seed
	}
	if chat {
		if len(b.Prompt) > 0 {
			return nil, badRequest("prompt", "a chat request sends messages, not a prompt")
		}
		if len(b.Messages) == 0 {
			return nil, badRequest("messages", "messages is empty; send at least one {\"role\": \"user\", \"content\": ...}")
		}
		if e := checkRoles(b.Messages); e != nil {
			return nil, e
		}
		choice, e := toolChoice(b.ToolChoice, b.Tools)
		if e != nil {
			return nil, e
		}
		c.reqs = []policy.Request{{Messages: b.Messages, Seed: seed, Tools: b.Tools, ToolChoice: choice}}
		c.parseCalls = len(b.Tools) > 0 && choice != "none"
	} else {
		if b.Messages != nil {
			return nil, badRequest("messages", "a completions request sends a prompt, not messages; use /v1/chat/completions")
		}
		if c.reqs, e = tokenPrompts(b.Prompt, seed); e != nil {
			return nil, e
		}
		if c.reqs != nil && c.echo {
			return nil, badRequest("echo", "echo is not served for a prompt of token ids; send the prompt as text to echo it")
		}
		if c.reqs == nil {
			prompts, e := strings1("prompt", b.Prompt)
			if e != nil {
				return nil, e
			}
			if prompts == nil {
				return nil, badRequest("prompt", "prompt is missing; send a string, a list of strings, a list of token ids or a list of such lists")
			}
			c.reqs = make([]policy.Request, len(prompts))
			for i, p := range prompts {
				c.reqs[i] = policy.Request{Prompt: p, Seed: seed}
			}
		}
	}
	// Compare before multiplying: a huge n must not wrap n × prompts to a
	// small number.
	if n > s.opts.MaxSamples || len(c.reqs) > s.opts.MaxSamples/n {
		return nil, badRequest("n", "n × prompts is %d × %d; this server serves at most %d samples per request", n, len(c.reqs), s.opts.MaxSamples)
	}
	if err := policy.Validate(c.reqs, c.sampling); err != nil {
		return nil, badRequest("", "%v", err)
	}
	return c, nil
}

// model resolves a request's model field: the base model ("" included)
// or a loaded adapter.
func (s *Server) model(name string) (shown, adapter string, e *apiError) {
	if name == "" || name == s.opts.Model {
		return s.opts.Model, "", nil
	}
	s.amu.RLock()
	defer s.amu.RUnlock()
	for _, a := range s.adapters {
		if a.Name == name {
			return name, name, nil
		}
	}
	return "", "", modelNotFound(name, s.servedList())
}

// servedList names the models for an error message. Callers hold amu.
func (s *Server) servedList() string {
	names := []string{strconv.Quote(s.opts.Model)}
	for _, a := range s.adapters {
		names = append(names, strconv.Quote(a.Name))
	}
	return strings.Join(names, ", ")
}

// strings1 reads a field that is a string or a list of strings; nil when
// absent or null.
func strings1(field string, raw json.RawMessage) ([]string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		hint := ""
		if field == "prompt" {
			hint = ", a list of token ids or a list of such lists"
		}
		return nil, badRequest(field, "field %q must be a string or a list of strings%s", field, hint)
	}
	if field == "prompt" && len(list) == 0 {
		return nil, badRequest(field, "prompt is an empty list; send at least one prompt")
	}
	return list, nil
}

// logprobs reads the logprobs fields: whether to return logprobs and how
// many alternatives (k) per position. Completions send logprobs: k, an
// integer from 0 to 20, or null; chat sends logprobs: true and
// top_logprobs: k (0 to 20), which needs logprobs true as in OpenAI's API.
func logprobs(raw json.RawMessage, top *int, chat bool) (bool, int, *apiError) {
	raw = bytes.TrimSpace(raw)
	on, k := false, 0
	var b bool
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
	case json.Unmarshal(raw, &b) == nil:
		on = b
	case chat:
		return false, 0, badRequest("logprobs", "field \"logprobs\" must be true or false; ask for alternatives with top_logprobs")
	default:
		if err := json.Unmarshal(raw, &k); err != nil {
			return false, 0, badRequest("logprobs", "field \"logprobs\" must be an integer or null")
		}
		if k < 0 || k > maxTopLogprobs {
			return false, 0, badRequest("logprobs", "logprobs is %d; it must be from 0 to %d (the alternatives per token)", k, maxTopLogprobs)
		}
		on = true
	}
	if chat && top != nil {
		if *top < 0 || *top > maxTopLogprobs {
			return false, 0, badRequest("top_logprobs", "top_logprobs is %d; it must be from 0 to %d", *top, maxTopLogprobs)
		}
		if *top > 0 && !on {
			return false, 0, badRequest("top_logprobs", "top_logprobs is %d but logprobs is not true; send logprobs: true with it", *top)
		}
		k = *top
	}
	if !on {
		k = 0
	}
	return on, k, nil
}

// generate answers /v1/completions and /v1/chat/completions, as one JSON
// body or, with stream: true, as an event stream cut from the finished
// samples (stream.go). Every error comes before the answer starts, so it
// is a JSON error with its status either way.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, chat bool) {
	var b body
	if e := readJSON(w, r, s.opts.MaxBodyBytes, &b); e != nil {
		writeError(w, e)
		return
	}
	c, e := s.parse(&b, chat)
	if e != nil {
		writeError(w, e)
		return
	}
	out, err := s.p.Generate(r.Context(), c.reqs, c.sampling)
	if err != nil {
		switch {
		case errors.Is(err, policy.ErrAdapterNotLoaded):
			s.amu.RLock()
			served := s.servedList()
			s.amu.RUnlock()
			e = modelNotFound(c.model, served)
			e.Message += ": " + err.Error()
		case r.Context().Err() != nil:
			e = &apiError{status: http.StatusServiceUnavailable, Type: "server_error", Message: "request canceled"}
		default:
			e = errInternal(fmt.Sprintf("policy: %v", err))
		}
		writeError(w, e)
		return
	}
	if e := check(out, c); e != nil {
		writeError(w, e)
		return
	}
	if c.echo && c.sampling.Logprobs && out[0][0].Prompt == nil {
		writeError(w, badRequest("echo", "this policy does not return the log-probabilities of prompts; send echo without logprobs, or logprobs without echo"))
		return
	}
	if c.stream {
		s.stream(w, r, out, c, chat)
		return
	}
	writeJSON(w, s.response(out, c, chat))
}

// check turns non-OK samples into the request's error: any invalid sample
// makes a 400, else any timeout a 504, else any other failure a 500.
func check(out [][]policy.Sample, c *call) *apiError {
	n := c.sampling.Samples()
	if len(out) != len(c.reqs) {
		return errInternal(fmt.Sprintf("the policy returned samples for %d of %d prompts", len(out), len(c.reqs)))
	}
	var timeout, infra *apiError
	for i, ss := range out {
		if len(ss) != n {
			return errInternal(fmt.Sprintf("the policy returned %d samples for prompt %d, want n=%d", len(ss), i, n))
		}
		for _, smp := range ss {
			if smp.Status == policy.StatusOK {
				continue
			}
			msg := smp.Error
			if msg == "" {
				msg = "sample status " + smp.Status
			}
			if len(out) > 1 {
				msg = fmt.Sprintf("prompt %d: %s", i, msg)
			}
			switch smp.Status {
			case policy.StatusInvalid:
				return badRequest("", "%s", msg)
			case policy.StatusTimeout:
				if timeout == nil {
					timeout = &apiError{status: http.StatusGatewayTimeout, Type: "timeout_error", Message: msg}
				}
			default:
				if infra == nil {
					infra = errInternal(msg)
				}
			}
		}
	}
	if timeout != nil {
		return timeout
	}
	if infra != nil {
		return infra
	}
	return nil
}

// Response bodies.
type (
	completionResponse struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Usage   usage    `json:"usage"`
		// PromptTokenIDs: a chat prompt's token ids, with return_token_ids
		// (vLLM's place for them).
		PromptTokenIDs []int32 `json:"prompt_token_ids,omitempty"`
	}
	choice struct {
		Index        int      `json:"index"`
		Text         *string  `json:"text,omitempty"`    // completions
		Message      *message `json:"message,omitempty"` // chat
		Logprobs     any      `json:"logprobs"`          // *textLogprobs, *chatLogprobs or nil
		FinishReason string   `json:"finish_reason"`
		StopReason   any      `json:"stop_reason"` // vLLM's: the stop string that ended the text, or null
		TokenIDs     []int32  `json:"token_ids,omitempty"`
		// PromptTokenIDs: a completions prompt's token ids, with
		// return_token_ids (vLLM's place for them).
		PromptTokenIDs []int32 `json:"prompt_token_ids,omitempty"`
	}
	message struct {
		Role string `json:"role"`
		// Content is null when a reply is all tool calls, as in vLLM.
		Content   *string         `json:"content"`
		ToolCalls []toolcall.Wire `json:"tool_calls,omitempty"`
	}
	usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
)

// response builds the answer to a request whose samples are all OK.
// Choice i·n+j is sample j of prompt i, as in vLLM.
func (s *Server) response(out [][]policy.Sample, c *call, chat bool) *completionResponse {
	resp := &completionResponse{Created: time.Now().Unix(), Model: c.model}
	id := s.ids.Add(1)
	if chat {
		resp.ID, resp.Object = "chatcmpl-"+strconv.FormatUint(id, 10), "chat.completion"
	} else {
		resp.ID, resp.Object = "cmpl-"+strconv.FormatUint(id, 10), "text_completion"
	}
	n := c.sampling.Samples()
	var sp speller
	if tt, ok := s.p.(policy.TokenTexter); ok && !c.asIDs {
		sp.tt = tt
	}
	resp.Choices = make([]choice, 0, len(out)*n)
	for i, ss := range out {
		if len(ss) > 0 {
			resp.Usage.PromptTokens += ss[0].PromptTokens
		}
		for j := range ss {
			smp := &ss[j]
			ch := choice{Index: i*n + j, FinishReason: smp.FinishReason}
			if smp.StopReason != "" {
				ch.StopReason = smp.StopReason
			}
			text := smp.Text
			if c.echo {
				text = c.reqs[i].Prompt + text
			}
			if chat {
				var called bool
				if ch.Message, called = toolMessage(text, c, i*n+j); called {
					ch.FinishReason = "tool_calls"
				}
			} else {
				ch.Text = &text
			}
			if c.tokenIDs {
				ch.TokenIDs = smp.TokenIDs
				if smp.Prompt != nil {
					if chat {
						resp.PromptTokenIDs = smp.Prompt.TokenIDs
					} else {
						ch.PromptTokenIDs = smp.Prompt.TokenIDs
					}
				}
			}
			if c.sampling.Logprobs && smp.Logprobs != nil {
				ps := positions(smp, c.echo)
				if chat {
					ch.Logprobs = chatLogprobsOf(ps, sp)
				} else {
					ch.Logprobs = textLogprobsOf(ps, sp, text)
				}
			}
			if smp.TokenIDs != nil {
				resp.Usage.CompletionTokens += len(smp.TokenIDs)
			} else {
				resp.Usage.CompletionTokens += len(smp.Logprobs)
			}
			resp.Choices = append(resp.Choices, ch)
		}
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	return resp
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, errInternal(fmt.Sprintf("encode response: %v", err)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b)
}

package policy

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// Message is one turn of a chat transcript. Its JSON is OpenAI's message:
// {"role", "content"}, with "tool_calls" (OpenAI's shape, toolcall.Wire)
// and "tool_call_id" only when set, so a transcript without tool calls
// encodes as it always has.
type Message struct {
	Role    string
	Content string
	// ToolCalls are the calls of an assistant message, made in the
	// function-calling format; Content is then the text before them.
	ToolCalls []toolcall.Call
	// ToolCallID names the call a message of role "tool" answers.
	ToolCallID string
}

// message is Message on the wire.
type message struct {
	Role       string          `json:"role"`
	Content    string          `json:"content"`
	ToolCalls  []toolcall.Wire `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// MarshalJSON writes m as an OpenAI chat message. It escapes nothing
// itself: encoding/json escapes <, > and & of a Marshaler's output when
// its caller asks, so a message encodes as it did without this method.
func (m Message) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(message{Role: m.Role, Content: m.Content, ToolCalls: toolcall.ToWire(m.ToolCalls), ToolCallID: m.ToolCallID}); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON reads an OpenAI chat message; a null content reads as "".
func (m *Message) UnmarshalJSON(b []byte) error {
	var w message
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*m = Message{Role: w.Role, Content: w.Content, ToolCalls: toolcall.FromWire(w.ToolCalls), ToolCallID: w.ToolCallID}
	return nil
}

// Text is what the model wrote for an assistant message: its content and
// its calls as Hermes text (toolcall.Join). A policy without a chat
// template (the tiny model) reads a transcript's messages as their Text.
func (m Message) Text() string { return toolcall.Join(m.Content, m.ToolCalls) }

// Request asks for samples for one prompt: a plain-text Prompt
// (completions), a chat transcript in Messages (chat completions), or the
// prompt's token ids in PromptTokenIDs; exactly one of them.
type Request struct {
	// ID names the prompt or episode turn; it is copied to every sample and
	// appears in error messages.
	ID       string
	Prompt   string
	Messages []Message
	// PromptTokenIDs, when not nil, is the prompt as token ids that the
	// policy continues exactly: no template and no tokenizer touches them
	// (vLLM's completions prompt given as a list of ids). A policy that
	// reads a beginning-of-sequence token before every prompt (the
	// embedded model) reads it before these too. It is how an episode
	// runs token-in/token-out (environments.Renderer).
	PromptTokenIDs []int32
	// Seed is the request's sampling seed. Sample j of a request uses a
	// generator seeded by SampleSeed(Seed, j), in process and over HTTP
	// alike, so the same seed gives the same text whatever the transport.
	Seed int64
	// Tools are offered to the policy for a chat request (OpenAI's
	// "tools"): a server with a chat template shows them to the model,
	// and one that parses calls (vLLM with --tool-call-parser hermes,
	// rlpipe policy serve) returns them in Sample.ToolCalls. Nil offers
	// none, and the request is sent as it always was.
	Tools []toolcall.Tool
	// ToolChoice is OpenAI's tool_choice: "" (the server's default,
	// "auto" when tools are offered), "auto", "none" or "required".
	ToolChoice string
}

// Sampling holds the sampling parameters shared by a batch of requests.
type Sampling struct {
	// N is the number of samples per request (the group size G); 0 means 1.
	N int `json:"n"`
	// Temperature 0 samples greedily.
	Temperature float64 `json:"temperature"`
	// TopP in (0, 1]; 0 means 1.
	TopP float64 `json:"top_p"`
	// MaxTokens bounds the completion; a sample that reaches it finishes
	// with FinishLength.
	MaxTokens int `json:"max_tokens"`
	// Stop strings end a sample (FinishStop); the stop string is not part of
	// the text.
	Stop []string `json:"stop,omitempty"`
	// Logprobs asks for per-token log-probabilities of the sampled tokens.
	Logprobs bool `json:"logprobs,omitempty"`
	// TopLogprobs, with Logprobs, also asks for the TopLogprobs most
	// likely tokens at each sampled position (Sample.TopLogprobs), as
	// OpenAI's top_logprobs; 0 for none.
	TopLogprobs int `json:"top_logprobs,omitempty"`
	// PromptLogprobs asks for the prompt's tokens and their
	// log-probabilities (Sample.Prompt), as vLLM's prompt_logprobs: what
	// the policy server's echo shows. With TopLogprobs k, each prompt
	// position carries its k most likely tokens too.
	PromptLogprobs bool `json:"prompt_logprobs,omitempty"`
	// Adapter names the LoRA adapter to sample from, as loaded with
	// AdapterLoader.LoadAdapter; "" samples the base model.
	Adapter string `json:"adapter,omitempty"`
}

// JSON returns the sampling parameters as the JSON object recorded in the
// trajectories table's sampler column. It fails on a temperature or top_p
// that JSON cannot hold (NaN, ±Inf) rather than record an empty sampler.
func (s Sampling) JSON() (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("sampling: encode the sampler column: %w", err)
	}
	return string(b), nil
}

// Finish reasons.
const (
	FinishStop   = "stop"   // the model ended the text or produced a stop string
	FinishLength = "length" // MaxTokens or the context was reached
	FinishError  = "error"  // no text: see Sample.Status and Sample.Error
)

// Sample statuses; they match the trajectories table's status column.
const (
	StatusOK         = "ok"
	StatusTimeout    = "timeout"
	StatusInfraError = "infra_error"
	// StatusInvalid marks a request the policy cannot serve (a prompt longer
	// than the context, an unknown character): retrying will not help.
	StatusInvalid = "env_error"
)

// Sample is one generated completion.
type Sample struct {
	RequestID string
	// Index is the sample's position among its request's N samples.
	Index int
	Text  string
	// TokenIDs and Logprobs are nil when the policy does not return them.
	// Logprobs are those of the distribution the tokens were drawn from:
	// log softmax(z/T) at the sampling temperature T (the model's own at
	// T 0 and 1), before top-p — the behaviour policy a trainer of the
	// tempered policy needs (docs/TRAINERS.md). vLLM returns them with
	// --logprobs-mode processed_logprobs; its default, raw_logprobs, is
	// log softmax(z) whatever T.
	TokenIDs []int32
	Logprobs []float32
	// TopLogprobs holds, when Sampling.TopLogprobs is k > 0 and the policy
	// computes them, the k most likely tokens at each position of TokenIDs
	// (fewer when the vocabulary is smaller), most likely first, ties by
	// lower id: the alternatives the model weighed, at the sampling
	// temperature without top-p like Logprobs. Nil otherwise.
	TopLogprobs  [][]TokenLogprob
	FinishReason string
	// StopReason is the stop string that ended the sample (FinishStop);
	// "" when the model ended it itself (EOS) or it ran into MaxTokens.
	StopReason string
	// Prompt holds the prompt's tokens and their log-probabilities when
	// Sampling.PromptLogprobs asked and the policy computes them; nil
	// otherwise. Samples of one request share it.
	Prompt *PromptLogprobs
	// PromptTokens counts the prompt's tokens when known.
	PromptTokens int
	// PolicyVersion names the model and adapter that produced the sample.
	PolicyVersion string
	// ToolCalls are the calls a policy that parses them found in the
	// reply (OpenAI's message.tool_calls); Text is then the content
	// before them, and TokenIDs still the tokens sampled, calls included.
	// Nil when there are none or the policy does not parse them: the
	// calls are then in Text, as the model wrote them.
	ToolCalls []toolcall.Call
	// Status is StatusOK or why no text exists; Error says more.
	Status string
	Error  string
}

// TokenLogprob is a token and its log-probability.
type TokenLogprob struct {
	ID      int32
	Logprob float32
}

// PromptLogprobs are a prompt's tokens, as the policy tokenized it, and for
// each its log-probability given the tokens before it (the policy's
// beginning-of-sequence token first, when it has one). TopLogprobs, when
// Sampling.TopLogprobs asked, holds the most likely tokens at each
// position, as Sample.TopLogprobs does.
type PromptLogprobs struct {
	TokenIDs    []int32
	Logprobs    []float32
	TopLogprobs [][]TokenLogprob
}

// TokenTexter is implemented by policies that can spell their tokens: the
// policy server writes the tokens of logprobs as text with it (and as
// "token_id:N" without it).
type TokenTexter interface {
	// TokenText returns the text token id stands for: the characters it
	// adds to a sample's Text, or a name in angle brackets ("<eos>") for a
	// special token, which adds none.
	TokenText(id int32) string
}

// Policy generates samples. Generate returns, for each request in order,
// its N samples in index order. A request that fails is a set of samples
// with a non-OK Status, not an error; the error is for a failure of the
// whole call (a canceled context, an adapter that is not loaded).
type Policy interface {
	Generate(ctx context.Context, reqs []Request, s Sampling) ([][]Sample, error)
}

// AdapterLoader is implemented by policies that hot-load LoRA adapters:
// LoadAdapter makes the PEFT adapter directory dir available as name,
// UnloadAdapter forgets it.
type AdapterLoader interface {
	LoadAdapter(ctx context.Context, name, dir string) error
	UnloadAdapter(ctx context.Context, name string) error
}

// ErrAdapterNotLoaded is returned by Generate when Sampling.Adapter names
// an adapter the policy does not hold.
var ErrAdapterNotLoaded = errors.New("adapter not loaded")

// ErrAdapterShape is returned by LoadAdapter when an adapter's tensors do
// not fit the base model; the message names the tensor.
var ErrAdapterShape = errors.New("adapter does not match the base model")

// ErrWeightsShape is returned by LoadWeights when a full-weights
// directory's model is not one the policy runs (another architecture,
// other tensor shapes); the message names the file and the field or
// tensor.
var ErrWeightsShape = errors.New("weights do not match the policy's model")

// SampleSeed derives the seed of sample index of a request seeded with
// seed. Every policy uses it so that a request split into several calls,
// or sent over HTTP, samples the same text.
func SampleSeed(seed int64, index int) uint64 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(seed))
	binary.LittleEndian.PutUint64(b[8:], uint64(index))
	h := fnv.New64a()
	h.Write(b[:])
	return h.Sum64()
}

// RequestSeed derives a request's seed from a run seed and the request's id,
// so that a prompt samples the same way whatever batch it lands in.
func RequestSeed(seed int64, id string) int64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(seed))
	h.Write(b[:])
	h.Write([]byte(id))
	return int64(h.Sum64() >> 1)
}

// Validate reports the first problem with a batch of requests.
func Validate(reqs []Request, s Sampling) error {
	if s.N < 0 {
		return fmt.Errorf("sampling: n is %d; it must be at least 1", s.N)
	}
	if s.Temperature < 0 || math.IsNaN(s.Temperature) || math.IsInf(s.Temperature, 0) {
		return fmt.Errorf("sampling: temperature is %g; it must be a number ≥ 0", s.Temperature)
	}
	if s.TopP < 0 || s.TopP > 1 || math.IsNaN(s.TopP) {
		return fmt.Errorf("sampling: top_p is %g; it must be in (0, 1]", s.TopP)
	}
	if s.MaxTokens < 0 {
		return fmt.Errorf("sampling: max_tokens is %d; it must be ≥ 0", s.MaxTokens)
	}
	if s.TopLogprobs < 0 {
		return fmt.Errorf("sampling: top_logprobs is %d; it must be ≥ 0", s.TopLogprobs)
	}
	for i, r := range reqs {
		if err := r.Check(); err != nil {
			return err
		}
		if len(r.Tools) > 0 && r.Prompt != "" {
			return fmt.Errorf("request %d (%q): tools are offered in a chat request: send messages, not a prompt", i, r.ID)
		}
		switch r.ToolChoice {
		case "", "auto", "none", "required":
		default:
			return fmt.Errorf("request %d (%q): tool_choice is %q; it must be auto, none or required", i, r.ID, r.ToolChoice)
		}
	}
	return nil
}

// ErrRequest marks a request that sets more than one of Prompt, Messages
// and PromptTokenIDs, or an empty PromptTokenIDs.
var ErrRequest = errors.New("malformed request")

// Check reports a request that sets more than one of Prompt, Messages and
// PromptTokenIDs, a PromptTokenIDs without tokens, or one with Tools or
// ToolChoice (a completions request has no tools: they belong in the
// token ids, as the template renders them); it wraps ErrRequest.
func (r Request) Check() error {
	switch {
	case r.PromptTokenIDs != nil && (r.Prompt != "" || len(r.Messages) > 0):
		return requestError(fmt.Sprintf("request %q: set prompt token ids alone, without a prompt or messages", r.ID))
	case r.PromptTokenIDs != nil && (len(r.Tools) > 0 || r.ToolChoice != ""):
		return requestError(fmt.Sprintf("request %q: tools are offered beside prompt token ids, which no policy reads: render the tools into the token ids (an environments.Renderer does at the first turn) and send none", r.ID))
	case r.PromptTokenIDs != nil && len(r.PromptTokenIDs) == 0:
		return requestError(fmt.Sprintf("request %q: prompt token ids are empty; send at least one token", r.ID))
	case r.Prompt != "" && len(r.Messages) > 0:
		return requestError(fmt.Sprintf("request %q: set prompt or messages, not both", r.ID))
	}
	return nil
}

// requestError is a Check failure: its message, matching ErrRequest.
type requestError string

func (e requestError) Error() string      { return string(e) }
func (requestError) Is(target error) bool { return target == ErrRequest }

// Samples returns n, or 1 when n is 0.
func (s Sampling) Samples() int {
	if s.N <= 0 {
		return 1
	}
	return s.N
}

// ErrorSamples returns n samples for req that carry status and err instead
// of text, for a request that could not be served.
func ErrorSamples(req Request, n int, status string, err error, version string) []Sample {
	out := make([]Sample, n)
	for j := range out {
		out[j] = Sample{RequestID: req.ID, Index: j, FinishReason: FinishError,
			PolicyVersion: version, Status: status, Error: err.Error()}
	}
	return out
}

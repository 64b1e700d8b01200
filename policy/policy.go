package policy

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
)

// Message is one turn of a chat transcript.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request asks for samples for one prompt: either a plain-text Prompt
// (completions) or a chat transcript in Messages (chat completions), never
// both.
type Request struct {
	// ID names the prompt or episode turn; it is copied to every sample and
	// appears in error messages.
	ID       string
	Prompt   string
	Messages []Message
	// Seed is the request's sampling seed. Sample j of a request uses a
	// generator seeded by SampleSeed(Seed, j), in process and over HTTP
	// alike, so the same seed gives the same text whatever the transport.
	Seed int64
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
	// Adapter names the LoRA adapter to sample from, as loaded with
	// AdapterLoader.LoadAdapter; "" samples the base model.
	Adapter string `json:"adapter,omitempty"`
}

// JSON returns the sampling parameters as the JSON object recorded in the
// trajectories table's sampler column.
func (s Sampling) JSON() string {
	b, _ := json.Marshal(s)
	return string(b)
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
	// Logprobs are those of the model at temperature 1 without top-p, the
	// quantities a policy-gradient trainer needs.
	TokenIDs     []int32
	Logprobs     []float32
	FinishReason string
	// PromptTokens counts the prompt's tokens when known.
	PromptTokens int
	// PolicyVersion names the model and adapter that produced the sample.
	PolicyVersion string
	// Status is StatusOK or why no text exists; Error says more.
	Status string
	Error  string
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
	if s.Temperature < 0 {
		return fmt.Errorf("sampling: temperature is %g; it must be ≥ 0", s.Temperature)
	}
	if s.TopP < 0 || s.TopP > 1 {
		return fmt.Errorf("sampling: top_p is %g; it must be in (0, 1]", s.TopP)
	}
	if s.MaxTokens < 0 {
		return fmt.Errorf("sampling: max_tokens is %d; it must be ≥ 0", s.MaxTokens)
	}
	for i, r := range reqs {
		if r.Prompt != "" && len(r.Messages) > 0 {
			return fmt.Errorf("request %d (%q): set prompt or messages, not both", i, r.ID)
		}
	}
	return nil
}

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

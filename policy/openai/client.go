package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai/retry"
	"github.com/rlpipe/rlpipe/policy/openai/wire"
)

// Log field names.
const (
	logEndpoint = "endpoint"
	logRequest  = "request"
	logAttempt  = "attempt"
	logWait     = "wait"
	logError    = "error"
	logAdapter  = "adapter"
	logWeights  = "weights"
)

// Client is a policy.Policy, a policy.AdapterLoader and a
// policy.WeightsLoader backed by OpenAI-compatible servers. It is safe
// for concurrent use.
type Client struct {
	opts Options
	http *http.Client
	log  zerolog.Logger
	eps  []*endpoint

	mu   sync.Mutex // guards the endpoints' counters, next, wake and rng
	next int        // round-robin start
	wake chan struct{}
	rng  *rand.Rand

	amu      sync.Mutex            // guards adapters and serializes adapter calls
	adapters policy.LoadedAdapters // loaded through this client, oldest first

	weights weights // the full weights the servers hold (weights.go)

	// Test hooks.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

var (
	_ policy.Policy        = (*Client)(nil)
	_ policy.AdapterLoader = (*Client)(nil)
	_ policy.WeightsLoader = (*Client)(nil)
)

// New checks opts and returns a Client. It makes no request: a server that
// is down shows up as infra_error samples, not here.
func New(opts *Options) (*Client, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	c := &Client{
		opts:  o,
		http:  o.HTTPClient,
		log:   o.Logger,
		wake:  make(chan struct{}),
		rng:   rand.New(rand.NewPCG(o.Seed, 0x726c70697065)),
		now:   time.Now,
		sleep: retry.Sleep,
	}
	for _, e := range o.Endpoints {
		base, _ := baseURL(e)
		c.eps = append(c.eps, &endpoint{base: base, shown: shownURL(e)})
	}
	if c.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = o.Concurrency
		t.MaxIdleConns = o.Concurrency * len(c.eps)
		c.http = &http.Client{Transport: t}
	}
	return c, nil
}

// String describes the client without its API key.
func (c *Client) String() string { return "openai.Client" + c.opts.String()[len("openai.Options"):] }

// Close releases idle connections.
func (c *Client) Close() error {
	c.http.CloseIdleConnections()
	return nil
}

// version is the PolicyVersion of samples from the base model or an
// adapter; "" without Options.Model, and samples then take the model the
// server names in its answer.
func (c *Client) version(adapter string) string {
	if adapter == "" || c.opts.Model == "" {
		return c.opts.Model
	}
	return c.opts.Model + "+" + adapter
}

// Generate sends one request per policy.Request, with n = s.N, spread over
// the endpoints; see the package documentation for the fields. A request
// that fails after the retries becomes samples with a non-OK status. The
// error is for a canceled ctx, or for an adapter the servers do not hold
// (policy.ErrAdapterNotLoaded). With Adapter naming weights loaded by
// LoadWeights the call first waits until the servers hold them (see
// LoadWeights), and the requests name the base model.
func (c *Client) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	out := make([][]policy.Sample, len(reqs))
	n := s.Samples()
	version := c.version(s.Adapter)
	if err := policy.Validate(nil, s); err != nil {
		for i, r := range reqs {
			out[i] = policy.ErrorSamples(r, n, policy.StatusInvalid, err, version)
		}
		return out, nil
	}
	// The weights the call samples: those Adapter names, or the base
	// model's (for the base model and its adapters).
	need := ""
	if s.Adapter != "" && c.isWeights(s.Adapter) {
		need = s.Adapter
		s.Adapter = "" // the servers serve weights under the base model's name
	}
	release, err := c.acquireWeights(ctx, need)
	if err != nil {
		return nil, err
	}
	defer release()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.opts.Concurrency*len(c.eps) + 1)
	for i, r := range reqs {
		g.Go(func() error {
			var err error
			out[i], err = c.generate(gctx, r, s, n, version)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("openai: generate: %w", context.Cause(ctx))
		}
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("openai: generate: %w", context.Cause(ctx))
	}
	return out, nil
}

// generate sends one request and reads its n samples.
func (c *Client) generate(ctx context.Context, r policy.Request, s policy.Sampling, n int, version string) ([]policy.Sample, error) {
	if err := r.Check(); err != nil {
		return policy.ErrorSamples(r, n, policy.StatusInvalid, err, version), nil
	}
	// Greedy samples are all the same, and vLLM refuses n > 1 at
	// temperature 0 ("n must be 1 when using greedy sampling"): ask for
	// one and repeat it.
	asked := n
	if s.Temperature == 0 {
		asked = 1
	}
	path, body, err := c.encode(r, s, asked)
	if err != nil {
		return policy.ErrorSamples(r, n, policy.StatusInvalid, fmt.Errorf("encode request %q: %w", r.ID, err), version), nil
	}
	var resp wire.Response
	err = c.call(ctx, nil, http.MethodPost, path, body, func(b []byte) error {
		resp = wire.Response{}
		return decodeResponse(b, asked, &resp)
	})
	if err == nil {
		out := samples(&resp, r, version, s)
		for j := asked; j < n; j++ {
			smp := out[0]
			smp.Index = j
			smp.TokenIDs, smp.Logprobs, smp.ToolCalls = slices.Clone(smp.TokenIDs), slices.Clone(smp.Logprobs), slices.Clone(smp.ToolCalls)
			out = append(out, smp)
		}
		return out, nil
	}
	var ce *callError
	if !errors.As(err, &ce) {
		return nil, err // ctx ended
	}
	if ce.status == http.StatusNotFound && s.Adapter != "" && !ce.foreign {
		return nil, fmt.Errorf("%w: %s: %s: load it on every endpoint with LoadAdapter first", policy.ErrAdapterNotLoaded, s.Adapter, ce.describe())
	}
	c.log.Debug().Str(logRequest, r.ID).Str(logError, ce.Error()).Msg("request failed")
	return policy.ErrorSamples(r, n, ce.sampleStatus(), fmt.Errorf("request %q: %w", r.ID, ce), version), nil
}

// encode builds the request body and picks the path.
func (c *Client) encode(r policy.Request, s policy.Sampling, n int) (string, []byte, error) {
	model := c.opts.Model
	if s.Adapter != "" {
		model = s.Adapter
	}
	if r.PromptTokenIDs == nil && (len(r.Messages) > 0 || c.opts.Chat) {
		msgs := r.Messages
		if len(msgs) == 0 {
			msgs = []policy.Message{{Role: "user", Content: r.Prompt}}
		}
		body := wire.ChatRequest{Model: model, Messages: msgs, N: n, Seed: &r.Seed, Temperature: s.Temperature,
			TopP: s.TopP, MaxTokens: s.MaxTokens, Stop: s.Stop, ReturnTokenIDs: true, Tools: r.Tools, ToolChoice: r.ToolChoice}
		if s.Logprobs {
			k := s.TopLogprobs
			body.Logprobs, body.TopLogprobs, body.TokensAsIDs = true, &k, true
		}
		b, err := json.Marshal(body)
		return pathChat, b, err
	}
	var prompt any = r.Prompt
	if r.PromptTokenIDs != nil { // token-in: a list of ids, continued as they are
		prompt = r.PromptTokenIDs
	}
	body := wire.CompletionRequest{Model: model, Prompt: prompt, N: n, Seed: &r.Seed, Temperature: s.Temperature,
		TopP: s.TopP, MaxTokens: s.MaxTokens, Stop: s.Stop, ReturnTokenIDs: true}
	if s.Logprobs {
		body.Logprobs, body.TokensAsIDs = max(1, s.TopLogprobs), true
	}
	b, err := json.Marshal(body)
	return pathCompletions, b, err
}

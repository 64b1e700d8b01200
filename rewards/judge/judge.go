package judge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai/retry"
	"github.com/rlpipe/rlpipe/policy/openai/wire"
)

// Log field names.
const (
	logJudge   = "judge"
	logStatus  = "status"
	logAttempt = "attempt"
	logWait    = "wait"
	logError   = "error"
	logCached  = "cached"
	logTokens  = "tokens"
)

// Input is what a judge grades: the rubric's template data.
type Input struct {
	Prompt     string
	Completion string
	Answer     string // a reference answer, if any
	Metadata   map[string]any
}

// Result is a judge's verdict on one input. It is what the memo records,
// so a replay returns the same Result with Cached set.
type Result struct {
	Score  float64 `json:"score"`
	Status string  `json:"status"` // StatusOK, StatusUnparseable, ...
	// Reason says why the status is not ok, in words a user can act on.
	Reason string `json:"reason,omitempty"`
	// Raw is the judge's output, capped at about 2 KB (head and tail).
	Raw       string  `json:"raw,omitempty"`
	TokensIn  int     `json:"tokens_in"`
	TokensOut int     `json:"tokens_out"`
	Cost      float64 `json:"cost"` // of the call that produced this Result
	// Cached: replayed from the memo, no request was made.
	Cached bool `json:"-"`
}

// Options are a Judge's dependencies. A nil *Options means defaults.
type Options struct {
	// HTTPClient sends the requests (default: a client whose idle
	// connection pool fits Config.Concurrency). Config.Timeout bounds each
	// request whatever the client's own timeout.
	HTTPClient *http.Client
	// Logger receives Debug lines per request and per retry (default: none).
	// The API key is never logged.
	Logger zerolog.Logger
	// Getenv looks up Config.APIKeyEnv (default os.Getenv).
	Getenv func(key string) string
}

// Judge scores inputs with one Config. It is safe for concurrent use.
type Judge struct {
	cfg    *compiled
	name   string
	key    any // Config.Key()
	apiKey string
	keyEnv string
	client *http.Client
	log    zerolog.Logger
	slots  chan struct{}
	usage  counters
	sleep  func(ctx context.Context, d time.Duration) error
}

// New validates cfg, compiles its rubric and reads the API key from the
// environment. A rubric that names an unknown field, a score pattern
// without exactly one group or an unset key variable fail here, before any
// request.
func New(cfg Config, opts *Options) (*Judge, error) {
	c, err := cfg.compile()
	if err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	j := &Judge{
		cfg:    c,
		name:   c.Name,
		key:    c.Config.Key(),
		keyEnv: c.APIKeyEnv,
		client: o.HTTPClient,
		log:    o.Logger,
		slots:  make(chan struct{}, c.Concurrency),
		sleep:  retry.Sleep,
	}
	if j.name == "" {
		j.name = c.Model
	}
	if c.APIKeyEnv != "" {
		if j.apiKey = strings.TrimSpace(o.Getenv(c.APIKeyEnv)); j.apiKey == "" {
			return nil, fmt.Errorf("%w: judge %q: $%s is not set: export the API key in it, or leave api_key_env empty for a server without keys", ErrConfig, j.name, c.APIKeyEnv)
		}
	}
	if j.client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = c.Concurrency
		j.client = &http.Client{Transport: t}
	}
	return j, nil
}

// memoKey identifies one judgment: the judge's Config.Key and the exact
// messages sent. Keying on the rendered rubric rather than on the Input
// means metadata the rubric does not use cannot cause a miss.
type memoKey struct {
	Judge    any              `json:"judge"`
	Messages []policy.Message `json:"messages"`
}

// Score grades one input. With a pipeline.Memoizer (a task's *pipeline.TaskContext)
// the judgment is recorded under the judge's Config.Key and the rendered
// rubric, and a retried task, a resumed run or a rescoring that meets the
// same judgment replays it without a request (Result.Cached).
//
// An answer without a usable score is not an error: the Result says
// unparseable, out_of_range or refused, and is recorded like any other.
// Score returns an error only when there is no answer:
//   - ErrUnavailable after the retries: not recorded, the next attempt
//     calls again;
//   - ErrRejected (a 4xx for this input) or ErrInput: permanent
//     (pipeline.ErrPermanent), recorded;
//   - ErrSetup (a bad key, model or URL; no quota): permanent, not
//     recorded, so a run resumed after the fix calls again;
//   - ctx's error.
//
// The Result of an error has status error.
func (j *Judge) Score(ctx context.Context, in Input, memo pipeline.Memoizer) (Result, error) {
	res, err := j.score(ctx, in, memo)
	if err != nil {
		res = Result{Status: StatusError, Reason: err.Error(), Cached: res.Cached}
	}
	j.usage.scored(res)
	ev := j.log.Debug().Str(logJudge, j.name).Str(logStatus, res.Status).Bool(logCached, res.Cached)
	if !res.Cached {
		ev = ev.Ints(logTokens, []int{res.TokensIn, res.TokensOut})
	}
	ev.Msg("judged")
	return res, err
}

func (j *Judge) score(ctx context.Context, in Input, memo pipeline.Memoizer) (Result, error) {
	var prompt strings.Builder
	if err := j.cfg.rubric.Execute(&prompt, in); err != nil {
		return Result{}, pipeline.Permanent(fmt.Errorf("%w: judge %s: %v", ErrInput, j.name, err))
	}
	req := wire.ChatRequest{
		Model:       j.cfg.Model,
		Messages:    []policy.Message{{Role: "user", Content: prompt.String()}},
		Temperature: j.cfg.Temperature,
		MaxTokens:   j.cfg.MaxTokens,
	}
	if j.cfg.Seed != nil {
		seed := int64(*j.cfg.Seed)
		req.Seed = &seed
	}
	if memo == nil {
		return j.call(ctx, req)
	}
	var (
		res    Result
		called bool
	)
	err := memo.Memo(ctx, memoKey{Judge: j.key, Messages: req.Messages}, &res, func(ctx context.Context) (any, error) {
		called = true
		r, err := j.call(ctx, req)
		if err != nil {
			return nil, err
		}
		return r, nil
	})
	res.Cached = !called
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, ErrSetup):
		// Kept out of the record (returned as transient), then made permanent.
		return res, pipeline.Permanent(err)
	default:
		return res, err
	}
}

// call makes one judgment: a request with retries, then the parse.
func (j *Judge) call(ctx context.Context, req wire.ChatRequest) (Result, error) {
	a, err := j.post(ctx, req)
	switch {
	case err == nil:
	case errors.Is(err, ErrRejected) || errors.Is(err, ErrInput):
		return Result{}, pipeline.Permanent(err)
	default:
		return Result{}, err
	}
	r := Result{
		Raw:       excerpt(j.redact(a.content), rawCap),
		TokensIn:  a.tokensIn,
		TokensOut: a.tokensOut,
		Cost:      j.cost(int64(a.tokensIn), int64(a.tokensOut)),
	}
	j.usage.spent(a.tokensIn, a.tokensOut)
	switch {
	case a.refusal != "":
		r.Status, r.Reason = StatusRefused, "the model refused: "+excerpt(j.redact(a.refusal), messageCap)
	case a.finish == "content_filter":
		r.Status, r.Reason = StatusRefused, "the output was withheld by the provider's content filter"
	default:
		r.Score, r.Status, r.Reason = parseScore(a.content, j.cfg.pattern, j.cfg.Min, j.cfg.Max)
		if r.Status == StatusUnparseable && a.finish == "length" {
			r.Reason += fmt.Sprintf("; the output was cut at max_tokens (%d): raise it or ask for the score first", j.cfg.MaxTokens)
		}
	}
	return r, nil
}

// cost prices tokens; computed from integer totals so sums stay exact.
func (j *Judge) cost(in, out int64) float64 {
	return (float64(in)*j.cfg.PriceInPerMTok + float64(out)*j.cfg.PriceOutPerMTok) / 1e6
}

// Usage returns the judge's totals since New.
func (j *Judge) Usage() Usage {
	u := j.usage.snapshot()
	u.Cost = j.cost(u.TokensIn, u.TokensOut)
	return u
}

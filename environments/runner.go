package environments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// Defaults of RunnerOptions.
const (
	DefaultMaxTurns        = 16
	DefaultObservationRole = "user"
)

// RunnerOptions tune a Runner. A nil *RunnerOptions means the defaults.
type RunnerOptions struct {
	// Sampling is used for every turn; N must be 0 or 1 (run G episodes
	// for a group of G).
	Sampling policy.Sampling
	// MaxTurns is the turn budget: the most policy replies an episode may
	// take; the episode is then "truncated". 0 means DefaultMaxTurns.
	MaxTurns int
	// Timeout is the wall-clock budget of an episode, Reset to the last
	// Step; the episode is then "timeout". 0 means none.
	Timeout time.Duration
	// MaxEpisodeTokens is the token budget: the most tokens the episode's
	// token sequence may hold — every turn's prompt as the policy
	// tokenized it (the first observation, the later observations and the
	// template's markers) and every reply — which is the context the
	// policy reads at its last turn and what a trainer must fit in one
	// pass. It is measured after each reply as that turn's prompt tokens
	// plus its reply's; past the budget the episode is "truncated" at that
	// turn, its reply kept but not passed to the environment. So an
	// episode that ends ok always fits. It needs a policy that returns
	// token ids (Run fails otherwise). 0 means none.
	MaxEpisodeTokens int
	// System, when not "", is the transcript's first message (role system).
	System string
	// ObservationRole is the role of observations in the transcript; ""
	// means DefaultObservationRole ("user").
	ObservationRole string
	// Seed is the run's seed; each turn's sampling seed derives from it and
	// the turn's request id (policy.RequestSeed).
	Seed int64
	// Logger receives a Debug line per episode; the zero value logs nothing.
	Logger zerolog.Logger
	// Renderer, when set, runs episodes token-in/token-out: each turn's
	// request is the episode's exact token sequence so far plus the
	// Renderer's tokens for the messages since (policy.Request's
	// PromptTokenIDs, no Messages), so a template that rewrites earlier
	// turns cannot break the sequence. The policy must return token ids.
	// nil sends the transcript as chat messages.
	Renderer Renderer
}

// Runner runs episodes of environments with a policy. It is safe for
// concurrent use; each concurrent episode needs its own Env.
type Runner struct {
	p policy.Policy
	o RunnerOptions
	// sampler is o.Sampling as the trajectories' sampler column.
	sampler string
}

// NewRunner returns a Runner that asks p for each action.
func NewRunner(p policy.Policy, opts *RunnerOptions) (*Runner, error) {
	var o RunnerOptions
	if opts != nil {
		o = *opts
	}
	if p == nil {
		return nil, errors.New("environments: NewRunner needs a policy")
	}
	if o.MaxTurns < 0 || o.Timeout < 0 || o.MaxEpisodeTokens < 0 {
		return nil, fmt.Errorf("environments: negative MaxTurns %d, Timeout %v or MaxEpisodeTokens %d", o.MaxTurns, o.Timeout, o.MaxEpisodeTokens)
	}
	if o.Sampling.N > 1 {
		return nil, fmt.Errorf("environments: sampling n is %d; an episode samples one reply per turn, run %d episodes instead", o.Sampling.N, o.Sampling.N)
	}
	if err := policy.Validate(nil, o.Sampling); err != nil {
		return nil, fmt.Errorf("environments: %w", err)
	}
	if o.MaxTurns == 0 {
		o.MaxTurns = DefaultMaxTurns
	}
	if o.ObservationRole == "" {
		o.ObservationRole = DefaultObservationRole
	}
	o.Sampling.N = 1
	sampler, err := o.Sampling.JSON()
	if err != nil {
		return nil, fmt.Errorf("environments: %w", err)
	}
	return &Runner{p: p, o: o, sampler: sampler}, nil
}

// Episode names one episode.
type Episode struct {
	// ID is passed to Env.Reset: it fixes the environment's randomness.
	// It becomes the trajectory's prompt_id.
	ID string
	// SampleIndex tells apart the episodes of a group that share ID (same
	// environment, different policy samples): it enters the sampling seeds.
	SampleIndex int32
	// GroupID groups episodes for group-relative advantages; "" means ID.
	GroupID string
}

// Result is one episode.
type Result struct {
	// Trajectory is the episode as a trajectories-table row: every turn
	// (system, observations, replies; a reply with the token ids and
	// logprobs the policy returned for it, and each turn with its status:
	// ok, or the episode's status on the turn that ended it), the last
	// reply as Completion, the token ids and logprobs of all replies
	// concatenated (nil unless every reply had them), the status and,
	// when not ok, the reason in Error.
	Trajectory tables.Trajectory
	// TurnTokens is the number of tokens of each reply, to split
	// Trajectory.TokenIDs by turn; nil when token ids are missing.
	TurnTokens []int32
	// Reward is the sum of StepRewards. Only an episode with status ok has
	// a reward that may be trained on.
	Reward      float64
	StepRewards []float64
	// Info merges the Info of every step.
	Info map[string]any
	// Unaligned says why the episode has no exact token sequence
	// (Trajectory.Sequence is nil): the policy returned no prompt or reply
	// token ids, or a turn's prompt did not begin with the tokens so far.
	// "" when the sequence is exact.
	Unaligned string
}

// Status returns the trajectory's status.
func (r Result) Status() string { return r.Trajectory.Status }

// Run runs one episode of env: Reset, then a policy reply and a Step per
// turn, until the environment is done (status ok), the turn or the token
// budget is spent (truncated) or the wall-clock budget is (timeout). A reply the
// policy could not produce ends the episode with the sample's status, an
// environment error with env_error or infra_error (ErrInfra). Env.End is
// called however the episode ends.
//
// The returned error is for a failure of the whole call: ctx ended, the
// policy's Generate failed (policy.Policy's contract), or a token budget
// is set and the policy did not say how many tokens a turn took; the
// Result is then incomplete.
func (r *Runner) Run(ctx context.Context, env Env, ep Episode) (res Result, err error) {
	o := r.o
	group := ep.GroupID
	if group == "" {
		group = ep.ID
	}
	key := ep.ID + "#" + strconv.Itoa(int(ep.SampleIndex))
	res.Trajectory = tables.Trajectory{
		PromptID: ep.ID, SampleIndex: ep.SampleIndex, GroupID: group,
		Sampler: r.sampler, Seed: policy.RequestSeed(o.Seed, key), Status: tables.StatusOK,
	}
	res.Info = map[string]any{}
	epCtx := ctx
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		epCtx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	start := time.Now()
	defer func() {
		if endErr := env.End(); endErr != nil {
			o.Logger.Warn().Err(endErr).Str("episode", ep.ID).Msg("end episode")
		}
		o.Logger.Debug().Str("episode", ep.ID).Int32("sample", ep.SampleIndex).Str("status", res.Trajectory.Status).
			Int("turns", len(res.StepRewards)).Float64("reward", res.Reward).Dur("took", time.Since(start)).Msg("episode")
	}()
	tr := &res.Trajectory
	stop := func(status, format string, args ...any) (Result, error) {
		msg := fmt.Sprintf(format, args...)
		tr.Status, tr.Error = status, &msg
		return res, nil
	}
	// envFailed classifies an error of Reset or Step.
	envFailed := func(what string, err error) (Result, error) {
		switch {
		case ctx.Err() != nil:
			return res, fmt.Errorf("episode %s: %s: %w", ep.ID, what, ctx.Err())
		case epCtx.Err() != nil:
			return stop(tables.StatusTimeout, "wall-clock budget of %v spent during %s after %d turns", o.Timeout, what, len(res.StepRewards))
		case errors.Is(err, ErrInfra):
			return stop(tables.StatusInfraError, "%s: %v", what, err)
		}
		return stop(tables.StatusEnvError, "%s: %v", what, err)
	}

	obs, err := env.Reset(epCtx, ep.ID)
	if err != nil {
		return envFailed("reset", err)
	}
	var msgs []policy.Message
	add := func(role, content string) {
		msgs = append(msgs, policy.Message{Role: role, Content: content})
		tr.Turns = append(tr.Turns, tables.Turn{Role: role, Content: content, Status: tables.StatusOK})
	}
	var tools []toolcall.Tool
	if to, ok := env.(ToolOffer); ok {
		tools = to.Tools()
	}
	if o.System != "" {
		add("system", o.System)
	}
	add(o.ObservationRole, obs)
	withTokens, withLogprobs := true, true
	seq := sequence{}
	tin := tokenIn{r: o.Renderer}
	defer func() {
		if err == nil {
			recordOutcome(&res)
			markEnding(tr)
		}
		if res.Unaligned = seq.unaligned; res.Unaligned == "" && len(seq.ids) > 0 {
			tr.Sequence, tr.Trainable = seq.ids, seq.mask
		} else if res.Unaligned != "" {
			o.Logger.Debug().Str("episode", ep.ID).Int32("sample", ep.SampleIndex).Str("reason", res.Unaligned).Msg("episode without an exact token sequence: not trained on")
		}
	}()
	for turn := 0; ; turn++ {
		if ctx.Err() != nil {
			return res, fmt.Errorf("episode %s: %w", ep.ID, ctx.Err())
		}
		if epCtx.Err() != nil {
			return stop(tables.StatusTimeout, "wall-clock budget of %v spent after %d turns", o.Timeout, turn)
		}
		if turn == o.MaxTurns {
			return stop(tables.StatusTruncated, "turn budget of %d turns spent before the episode ended", o.MaxTurns)
		}
		id := key + "/" + strconv.Itoa(turn)
		req := policy.Request{ID: id, Messages: slices.Clone(msgs), Seed: policy.RequestSeed(o.Seed, id), Tools: tools}
		if o.Renderer != nil {
			if req.PromptTokenIDs, err = tin.prompt(epCtx, &seq, msgs, tools); err != nil {
				return envFailed(fmt.Sprintf("render turn %d", turn), err)
			}
			// The rendered prompt carries the tools (the first turn's
			// Suffix); a completions request has no tools field, and
			// policy.Validate refuses tools beside token ids.
			req.Messages, req.Tools = nil, nil
		}
		out, err := r.p.Generate(epCtx, []policy.Request{req}, o.Sampling)
		if err != nil {
			if ctx.Err() == nil && epCtx.Err() != nil {
				return stop(tables.StatusTimeout, "wall-clock budget of %v spent while the policy wrote turn %d", o.Timeout, turn)
			}
			return res, fmt.Errorf("episode %s turn %d: generate: %w", ep.ID, turn, err)
		}
		if len(out) != 1 {
			return res, fmt.Errorf("episode %s turn %d: the policy returned %d sample groups for 1 request, want 1", ep.ID, turn, len(out))
		}
		if len(out[0]) != 1 {
			return res, fmt.Errorf("episode %s turn %d: the policy returned %d samples for n=1, want 1", ep.ID, turn, len(out[0]))
		}
		s := out[0][0]
		tr.PolicyVersion = s.PolicyVersion
		if s.Status != policy.StatusOK {
			if s.Status == policy.StatusTimeout && epCtx.Err() != nil && ctx.Err() == nil {
				return stop(tables.StatusTimeout, "wall-clock budget of %v spent while the policy wrote turn %d", o.Timeout, turn)
			}
			status := s.Status
			if !slices.Contains(tables.Statuses, status) {
				status = tables.StatusInfraError
			}
			return stop(status, "policy failed at turn %d: %s", turn, s.Error)
		}
		if o.Renderer != nil {
			if err := tin.replied(turn, req.PromptTokenIDs, &s, len(msgs)+1); err != nil {
				return res, fmt.Errorf("episode %s: %w", ep.ID, err)
			}
		}
		// The context this turn took: its prompt and its reply, in tokens.
		used, counted := contextTokens(s)
		if o.MaxEpisodeTokens > 0 && !counted {
			return res, fmt.Errorf("episode %s turn %d: a token budget (%d) is set but the policy returned no token ids for the turn's prompt or reply: use a policy that returns them (vLLM with return_token_ids, the embedded model) or drop the budget", ep.ID, turn, o.MaxEpisodeTokens)
		}
		seq.add(turn, s)
		// The env reads the reply as the model wrote it; calls the policy
		// returned apart are written back after the content (tools.go).
		content, calls := toolCallsOf(s, tools, turn)
		action := toolcall.Join(s.Text, s.ToolCalls)
		add("assistant", action)
		reply := &tr.Turns[len(tr.Turns)-1]
		reply.TokenIDs, reply.Logprobs = slices.Clone(s.TokenIDs), slices.Clone(s.Logprobs)
		tr.Completion, tr.FinishReason = action, s.FinishReason
		withTokens = withTokens && s.TokenIDs != nil
		withLogprobs = withLogprobs && s.Logprobs != nil
		if withTokens {
			tr.TokenIDs = append(tr.TokenIDs, s.TokenIDs...)
			res.TurnTokens = append(res.TurnTokens, int32(len(s.TokenIDs)))
			tr.NumTokens = int32(len(tr.TokenIDs))
		} else {
			tr.TokenIDs, res.TurnTokens, tr.NumTokens = nil, nil, 0
		}
		if withLogprobs {
			tr.Logprobs = append(tr.Logprobs, s.Logprobs...)
		} else {
			tr.Logprobs = nil
		}
		if o.MaxEpisodeTokens > 0 && used > o.MaxEpisodeTokens {
			return stop(tables.StatusTruncated, "token budget of %d tokens passed at turn %d: its prompt held %d tokens and its reply %d", o.MaxEpisodeTokens, turn, used-len(s.TokenIDs), len(s.TokenIDs))
		}

		st, err := env.Step(epCtx, action)
		if err != nil {
			return envFailed(fmt.Sprintf("step %d", turn), err)
		}
		if st.ToolResults != nil && len(st.ToolResults) != len(calls) {
			// Results that answer no call in particular cannot go back as
			// tool messages, and dropping them would hide the env's bug.
			return stop(tables.StatusEnvError, "step %d: the environment returned %d tool results for the %d tool calls of the reply: an environment offering tools answers each call in order (Step.ToolResults), or returns none and an observation", turn, len(st.ToolResults), len(calls))
		}
		answered := len(calls) > 0 && len(st.ToolResults) == len(calls)
		if answered {
			// A structured turn: the calls on the reply, each result a
			// tool message (tools.go).
			msgs[len(msgs)-1] = policy.Message{Role: "assistant", Content: content, ToolCalls: calls}
			tr.Turns[len(tr.Turns)-1].Content = content
			if st.ToolCalls == "" {
				if st.ToolCalls, err = callsJSON(calls); err != nil {
					return envFailed(fmt.Sprintf("step %d", turn), err)
				}
			}
		}
		if st.ToolCalls != "" {
			calls := st.ToolCalls
			tr.Turns[len(tr.Turns)-1].ToolCalls = &calls
		}
		if answered {
			for k, result := range st.ToolResults {
				msgs = append(msgs, policy.Message{Role: "tool", Content: result, ToolCallID: calls[k].ID})
				tr.Turns = append(tr.Turns, tables.Turn{Role: "tool", Content: result, Status: tables.StatusOK})
			}
		}
		res.StepRewards = append(res.StepRewards, st.Reward)
		res.Reward += st.Reward
		maps.Copy(res.Info, st.Info)
		if st.Done {
			if st.Observation != "" {
				tr.Turns = append(tr.Turns, tables.Turn{Role: o.ObservationRole, Content: st.Observation, Status: tables.StatusOK})
			}
			return res, nil
		}
		if !answered || st.Observation != "" {
			add(o.ObservationRole, st.Observation)
		}
	}
}

// contextTokens is the number of tokens of a turn's context: its prompt
// as the policy tokenized it (its token ids, else the count it reported)
// and its reply. counted is false when the policy did not say.
func contextTokens(s policy.Sample) (n int, counted bool) {
	prompt := s.PromptTokens
	if s.Prompt != nil && s.Prompt.TokenIDs != nil {
		prompt = len(s.Prompt.TokenIDs)
	}
	if prompt == 0 || s.TokenIDs == nil {
		return 0, false
	}
	return prompt + len(s.TokenIDs), true
}

// sequence builds an episode's exact token sequence from what the policy
// returned each turn: the turn's prompt token ids, which must begin with
// the sequence so far (their remaining tokens, the observation and the
// template's markers, are given: mask 0), then the reply's (mask 1).
// Nothing is re-tokenized; a turn that breaks the rule leaves the episode
// unaligned, with the reason.
type sequence struct {
	ids, mask []int32
	unaligned string
}

func (q *sequence) add(turn int, s policy.Sample) {
	if q.unaligned != "" {
		return
	}
	switch {
	case s.Prompt == nil || s.Prompt.TokenIDs == nil:
		q.fail("the policy returned no prompt token ids at turn %d (ask for prompt_logprobs)", turn)
		return
	case s.TokenIDs == nil:
		q.fail("the policy returned no token ids for its reply at turn %d", turn)
		return
	}
	p := s.Prompt.TokenIDs
	if i := mismatch(p, q.ids); i >= 0 {
		q.fail("the prompt of turn %d does not begin with the %d tokens of the turns before it (they differ at token %d): the policy's template or tokenizer rewrote the earlier turns", turn, len(q.ids), i)
		return
	}
	for _, id := range p[len(q.ids):] {
		q.ids, q.mask = append(q.ids, id), append(q.mask, 0)
	}
	for _, id := range s.TokenIDs {
		q.ids, q.mask = append(q.ids, id), append(q.mask, 1)
	}
}

func (q *sequence) fail(format string, args ...any) {
	q.unaligned = fmt.Sprintf(format, args...)
	q.ids, q.mask = nil, nil
}

// mismatch is the first index where p does not extend prefix, or -1 when
// p begins with prefix.
func mismatch(p, prefix []int32) int {
	for i, id := range prefix {
		if i >= len(p) || p[i] != id {
			return i
		}
	}
	return -1
}

// markEnding gives the turn at which an episode that did not end ok
// stopped the episode's status: its last turn, which is the reply that
// passed the token budget or that the environment failed on, or the
// observation after which the turn or time budget ran out or the policy
// could not reply. Every other turn stays ok. (An episode whose Reset
// failed has no turns.)
func markEnding(tr *tables.Trajectory) {
	if n := len(tr.Turns); n > 0 && tr.Status != tables.StatusOK {
		tr.Turns[n-1].Status = tr.Status
	}
}

// recordOutcome writes the episode's outcome in its environment (the sum
// of its step rewards and the merged Info) into the trajectory's
// env_outcome. Info that JSON cannot hold (a NaN, a channel) makes the
// episode an env_error naming the cause, rather than a row that cannot
// be written.
func recordOutcome(res *Result) {
	out := struct {
		Reward *float64       `json:"reward"` // null when not a number
		Info   map[string]any `json:"info"`
	}{Info: res.Info}
	if !math.IsNaN(res.Reward) && !math.IsInf(res.Reward, 0) {
		out.Reward = &res.Reward
	}
	b, err := json.Marshal(out)
	if err != nil {
		out.Info = nil
		var err2 error
		if b, err2 = json.Marshal(out); err2 != nil { // a finite number and null: should not fail
			b = []byte(`{"reward":null,"info":null}`)
		}
		msg := fmt.Sprintf("the environment's step info cannot be recorded as JSON: %v", err)
		res.Trajectory.Status, res.Trajectory.Error = tables.StatusEnvError, &msg
	}
	s := string(b)
	res.Trajectory.EnvOutcome = &s
}

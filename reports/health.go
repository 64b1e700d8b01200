package reports

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Stat describes a set of values: population standard deviation, NaN
// fields when Count is 0.
type Stat struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Std   float64 `json:"std"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
}

func statOf(v []float64) Stat {
	s := Stat{Count: len(v), Mean: math.NaN(), Std: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	if len(v) == 0 {
		return s
	}
	s.Mean, s.Min, s.Max = 0, v[0], v[0]
	for _, x := range v {
		s.Mean += x
		s.Min, s.Max = math.Min(s.Min, x), math.Max(s.Max, x)
	}
	s.Mean /= float64(len(v))
	s.Std = 0
	for _, x := range v {
		s.Std += (x - s.Mean) * (x - s.Mean)
	}
	s.Std = math.Sqrt(s.Std / float64(len(v)))
	return s
}

// Health is one iteration's training health, computed from its stored
// tables (trajectories, rewards) and, for the optimizer figures, its train
// metrics file. A float that could not be computed is NaN (a null in the
// health table); docs/REPORTS.md defines every field.
type Health struct {
	Iteration int `json:"iteration"`

	// Samples counts trajectories; Scored those with an ok trajectory and
	// an ok, finite reward; Errored those that failed to generate
	// (infra_error, env_error) or to be scored; TimedOut those with status
	// timeout; Truncated those with status truncated.
	Samples   int `json:"samples"`
	Scored    int `json:"scored"`
	Errored   int `json:"errored"`
	TimedOut  int `json:"timed_out"`
	Truncated int `json:"truncated"`

	// Reward is the total reward of the scored samples; Components each
	// reward component (ComponentNames lists them in name order).
	Reward         Stat            `json:"reward"`
	Components     map[string]Stat `json:"components,omitempty"`
	ComponentNames []string        `json:"component_names,omitempty"`

	// Groups are the prompts of the iteration (trajectories grouped by
	// group_id, else prompt_id) with at least one scored sample.
	// FracZeroStd is the fraction of those with two or more scored
	// samples whose samples all got the same total (NaN, null, when no
	// group has two, as under n: 1: a group of one has no spread to be
	// zero); FracSolvedAll / FracSolvedNone / FracMixed split all groups
	// by correctness (every, no, or some scored sample correct).
	Groups         int     `json:"groups"`
	FracZeroStd    float64 `json:"frac_reward_zero_std"`
	FracSolvedAll  float64 `json:"frac_solved_all"`
	FracSolvedNone float64 `json:"frac_solved_none"`
	FracMixed      float64 `json:"frac_mixed"`

	// Response length in tokens (num_tokens) and characters over generated
	// samples (status ok or truncated); FracLength is the fraction stopped
	// by max_tokens (finish_reason "length" or status truncated).
	LengthMean float64 `json:"response_length_mean"`
	LengthMax  int     `json:"response_length_max"`
	CharsMean  float64 `json:"response_chars_mean"`
	FracLength float64 `json:"frac_finish_length"`
	// StalenessMean is the mean policy lag of the generated samples.
	StalenessMean float64 `json:"staleness_mean"`

	// TopShare is the fraction of generated samples whose completion
	// (trimmed) equals the most frequent one; TopPrompts how many distinct
	// prompts that completion answered; TopCompletion the text (at most
	// 200 bytes).
	TopShare      float64 `json:"top_completion_share"`
	TopPrompts    int     `json:"top_completion_prompts"`
	TopCompletion string  `json:"top_completion"`

	// Disagreement is the fraction of scored samples with both a judge and
	// a verifier verdict where the two differ (NaN without both kinds).
	Disagreement float64 `json:"judge_verifier_disagreement"`
	// FormatMean and CorrectMean are the means of the format* and
	// correct* components (NaN without them); FormatWithoutCorrect the
	// fraction of scored samples that pass format but are not correct by
	// the spec's rule, among those with both kinds of component (NaN
	// unless both exist).
	FormatMean           float64 `json:"format_mean"`
	CorrectMean          float64 `json:"correct_mean"`
	FormatWithoutCorrect float64 `json:"format_without_correct"`

	// Optimizer figures from the train metrics file (NaN when absent).
	Loss       float64 `json:"loss"`
	PolicyLoss float64 `json:"policy_loss"`
	KL         float64 `json:"kl"`
	Entropy    float64 `json:"entropy"`
	ClipLow    float64 `json:"clip_frac_low"`
	ClipHigh   float64 `json:"clip_frac_high"`
	RatioDev   float64 `json:"ratio_dev"`
	GradNorm   float64 `json:"grad_norm"`
	// MismatchKL and RatioMax are the train/inference mismatch before
	// the update (trainers/grpo.OffPolicy): k3 of KL(behaviour ‖ trainer)
	// and the largest ratio.
	MismatchKL float64 `json:"mismatch_kl"`
	RatioMax   float64 `json:"ratio_max"`
}

// TrainMetrics are the fields of a train stage's metrics file the health
// table uses; a trainer that writes them (the embedded GRPO trainer does,
// see trainers/embedded.Metrics) gets them reported. Missing fields stay
// nil.
type TrainMetrics struct {
	Loss       *float64 `json:"loss"`
	PolicyLoss *float64 `json:"policy_loss"`
	KL         *float64 `json:"kl"`
	Entropy    *float64 `json:"entropy"`
	ClipLow    *float64 `json:"clip_frac_low"`
	ClipHigh   *float64 `json:"clip_frac_high"`
	RatioDev   *float64 `json:"ratio_dev"`
	GradNorm   *float64 `json:"grad_norm"`
	MismatchKL *float64 `json:"mismatch_kl"`
	RatioMax   *float64 `json:"ratio_max"`
}

// ParseTrainMetrics decodes a metrics file (runs.ParseTrainMetrics);
// fields it lacks, or holds as null, stay nil.
func ParseTrainMetrics(b []byte) (*TrainMetrics, error) {
	m, err := runs.ParseTrainMetrics(b)
	if err != nil {
		return nil, err
	}
	return trainFigures(m), nil
}

// trainFigures picks the health table's figures out of a train metrics
// file; nil for nil.
func trainFigures(m *runs.TrainMetrics) *TrainMetrics {
	if m == nil {
		return nil
	}
	get := func(name string) *float64 {
		if v, ok := m.Get(name); ok {
			return &v
		}
		return nil
	}
	return &TrainMetrics{Loss: get("loss"), PolicyLoss: get("policy_loss"), KL: get("kl"), Entropy: get("entropy"),
		ClipLow: get("clip_frac_low"), ClipHigh: get("clip_frac_high"), RatioDev: get("ratio_dev"), GradNorm: get("grad_norm"),
		MismatchKL: get("mismatch_kl"), RatioMax: get("ratio_max")}
}

// Component name rules (see docs/REPORTS.md): a component is of a kind
// when its name starts with one of the kind's prefixes.
var (
	judgePrefixes    = []string{"judge"}
	verifierPrefixes = []string{"verifier", "verify"}
	formatPrefixes   = []string{"format"}
	correctPrefixes  = []string{"correct", "accuracy"}
)

func hasPrefix(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// HealthOptions tune ComputeHealth. Nil means defaults.
type HealthOptions struct {
	// PassThreshold: a format, judge or verifier component value (or a
	// judge score) at or above it counts as a pass (default 0.5). It does
	// not decide correctness: Correct does.
	PassThreshold float64
	// Correct is the reward spec's correctness rule (rewards.Spec's
	// Correctness), the one evaluation counts pass@k with. Nil means
	// tables.DefaultCorrectness of the components the rewards have:
	// component "correct" ≥ 0.5 when there is one, else a total > 0.
	Correct *tables.Correctness
}

func (o *HealthOptions) withDefaults() HealthOptions {
	var v HealthOptions
	if o != nil {
		v = *o
	}
	if v.PassThreshold == 0 {
		v.PassThreshold = 0.5
	}
	return v
}

type sampleKey struct {
	prompt string
	index  int32
}

func nan() float64 { return math.NaN() }

// ComputeHealth computes one iteration's health from its trajectories and
// rewards (matched by prompt_id and sample_index) and its train metrics
// (nil when there are none). It is a pure function of its arguments.
//
// A sample is correct by the reward spec's rule (HealthOptions.Correct,
// tables.Correctness), the rule evaluation uses.
func ComputeHealth(iteration int, trajs []tables.Trajectory, rewards []tables.Reward, tm *TrainMetrics, opts *HealthOptions) Health {
	o := opts.withDefaults()
	h := Health{Iteration: iteration, Samples: len(trajs), Disagreement: nan(), FormatMean: nan(), CorrectMean: nan(), FormatWithoutCorrect: nan(),
		Loss: nan(), PolicyLoss: nan(), KL: nan(), Entropy: nan(), ClipLow: nan(), ClipHigh: nan(), RatioDev: nan(), GradNorm: nan(),
		MismatchKL: nan(), RatioMax: nan(), LengthMean: nan(), CharsMean: nan(), FracLength: nan(), StalenessMean: nan(), TopShare: nan(),
		FracZeroStd: nan(), FracSolvedAll: nan(), FracSolvedNone: nan(), FracMixed: nan()}
	byKey := make(map[sampleKey]*tables.Reward, len(rewards))
	names := map[string]bool{}
	for i := range rewards {
		byKey[sampleKey{rewards[i].PromptID, rewards[i].SampleIndex}] = &rewards[i]
		for n := range rewards[i].Components {
			names[n] = true
		}
	}
	for n := range names {
		h.ComponentNames = append(h.ComponentNames, n)
	}
	slices.Sort(h.ComponentNames)
	var formatNames, correctNames, judgeNames, verifierNames []string
	for _, n := range h.ComponentNames {
		switch {
		case hasPrefix(n, formatPrefixes):
			formatNames = append(formatNames, n)
		case hasPrefix(n, correctPrefixes):
			correctNames = append(correctNames, n)
		case hasPrefix(n, judgePrefixes):
			judgeNames = append(judgeNames, n)
		case hasPrefix(n, verifierPrefixes):
			verifierNames = append(verifierNames, n)
		}
	}
	if names[tables.CorrectComponent] {
		correctNames = []string{tables.CorrectComponent}
	}
	rule := tables.DefaultCorrectness(h.ComponentNames)
	if o.Correct != nil {
		rule = *o.Correct
	}

	type group struct {
		totals  []float64
		correct int
	}
	groups := map[string]*group{}
	var totals []float64
	comps := map[string][]float64{}
	var formats, corrects []float64
	var lengths, chars, stale float64
	generated, length, fwc, both, disagree, jvBoth := 0, 0, 0, 0, 0, 0
	counts := map[string]int{}
	promptsOf := map[string]map[string]bool{}
	for i := range trajs {
		t := &trajs[i]
		switch t.Status {
		case tables.StatusTimeout:
			h.TimedOut++
		case tables.StatusTruncated:
			h.Truncated++
		case tables.StatusOK:
		default:
			h.Errored++
		}
		if t.Status == tables.StatusOK || t.Status == tables.StatusTruncated {
			generated++
			lengths += float64(t.NumTokens)
			chars += float64(len([]rune(t.Completion)))
			h.LengthMax = max(h.LengthMax, int(t.NumTokens))
			stale += float64(t.Staleness)
			if t.FinishReason == "length" || t.Status == tables.StatusTruncated {
				length++
			}
			c := strings.TrimSpace(t.Completion)
			counts[c]++
			if promptsOf[c] == nil {
				promptsOf[c] = map[string]bool{}
			}
			promptsOf[c][t.PromptID] = true
		}
		if t.Status != tables.StatusOK {
			continue
		}
		r := byKey[sampleKey{t.PromptID, t.SampleIndex}]
		if r == nil {
			continue
		}
		if !r.Scored() {
			h.Errored++
			continue
		}
		h.Scored++
		totals = append(totals, r.Total)
		for n, v := range r.Components {
			if tables.Finite(v) {
				comps[n] = append(comps[n], v)
			}
		}
		fm, okF := meanOf(r.Components, formatNames)
		cm, okC := meanOf(r.Components, correctNames)
		if okF {
			formats = append(formats, fm)
		}
		if okC {
			corrects = append(corrects, cm)
		}
		correct := rule.Correct(*r)
		if okF && okC {
			both++
			if fm >= o.PassThreshold && !correct {
				fwc++
			}
		}
		if j, v, ok := verdicts(r, judgeNames, verifierNames, o.PassThreshold); ok {
			jvBoth++
			if j != v {
				disagree++
			}
		}
		gid := t.GroupID
		if gid == "" {
			gid = t.PromptID
		}
		g := groups[gid]
		if g == nil {
			g = &group{}
			groups[gid] = g
		}
		g.totals = append(g.totals, r.Total)
		if correct {
			g.correct++
		}
	}
	h.Reward = statOf(totals)
	if len(comps) > 0 {
		h.Components = make(map[string]Stat, len(comps))
		for n, v := range comps {
			h.Components[n] = statOf(v)
		}
	}
	h.Groups = len(groups)
	if h.Groups > 0 {
		zero, multi, all, none := 0, 0, 0, 0
		for _, g := range groups {
			if len(g.totals) >= 2 {
				multi++
				if statOf(g.totals).Std == 0 {
					zero++
				}
			}
			switch g.correct {
			case len(g.totals):
				all++
			case 0:
				none++
			}
		}
		n := float64(h.Groups)
		if multi > 0 {
			h.FracZeroStd = float64(zero) / float64(multi)
		}
		h.FracSolvedAll, h.FracSolvedNone = float64(all)/n, float64(none)/n
		h.FracMixed = float64(h.Groups-all-none) / n
	}
	if generated > 0 {
		g := float64(generated)
		h.LengthMean, h.CharsMean, h.FracLength, h.StalenessMean = lengths/g, chars/g, float64(length)/g, stale/g
		top, topN := "", -1
		for c, n := range counts {
			// Most frequent; ties go to the text that sorts first, so the
			// result does not depend on map order.
			if n > topN || n == topN && c < top {
				top, topN = c, n
			}
		}
		h.TopShare, h.TopPrompts, h.TopCompletion = float64(topN)/g, len(promptsOf[top]), clip(top, 200)
	}
	if len(formats) > 0 {
		h.FormatMean = statOf(formats).Mean
	}
	if len(corrects) > 0 {
		h.CorrectMean = statOf(corrects).Mean
	}
	if both > 0 {
		h.FormatWithoutCorrect = float64(fwc) / float64(both)
	}
	if jvBoth > 0 {
		h.Disagreement = float64(disagree) / float64(jvBoth)
	}
	if tm != nil {
		set := func(dst *float64, v *float64) {
			if v != nil {
				*dst = *v
			}
		}
		set(&h.Loss, tm.Loss)
		set(&h.PolicyLoss, tm.PolicyLoss)
		set(&h.KL, tm.KL)
		set(&h.Entropy, tm.Entropy)
		set(&h.ClipLow, tm.ClipLow)
		set(&h.ClipHigh, tm.ClipHigh)
		set(&h.RatioDev, tm.RatioDev)
		set(&h.GradNorm, tm.GradNorm)
		set(&h.MismatchKL, tm.MismatchKL)
		set(&h.RatioMax, tm.RatioMax)
	}
	return h
}

// meanOf is the mean of the named components a row has.
func meanOf(c map[string]float64, names []string) (float64, bool) {
	s, n := 0.0, 0
	for _, name := range names {
		if v, ok := c[name]; ok && !math.IsNaN(v) {
			s += v
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return s / float64(n), true
}

// verdicts returns a row's judge and verifier verdicts. The JSON outputs
// win when the row has both: the verifier passes when every verifier
// passed, the judge when the mean judge score passes. Otherwise the
// judge* and verifier* components decide (their means against the
// threshold). ok is false unless the row has both kinds.
func verdicts(r *tables.Reward, judgeNames, verifierNames []string, threshold float64) (judge, verifier, ok bool) {
	if r.VerifierOutputs != "" && r.JudgeOutputs != "" {
		var vs map[string]struct {
			Passed bool `json:"passed"`
		}
		var js map[string]struct {
			Score float64 `json:"score"`
		}
		if json.Unmarshal([]byte(r.VerifierOutputs), &vs) == nil && json.Unmarshal([]byte(r.JudgeOutputs), &js) == nil && len(vs) > 0 && len(js) > 0 {
			verifier = true
			for _, v := range vs {
				verifier = verifier && v.Passed
			}
			s := 0.0
			for _, j := range js {
				s += j.Score
			}
			return s/float64(len(js)) >= threshold, verifier, true
		}
	}
	jm, okJ := meanOf(r.Components, judgeNames)
	vm, okV := meanOf(r.Components, verifierNames)
	if !okJ || !okV {
		return false, false, false
	}
	return jm >= threshold, vm >= threshold, true
}

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// sortHealth orders rows by iteration.
func sortHealth(h []Health) {
	slices.SortFunc(h, func(a, b Health) int { return cmp.Compare(a.Iteration, b.Iteration) })
}

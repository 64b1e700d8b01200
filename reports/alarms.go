package reports

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
)

// Alarm rule names.
const (
	RuleRewardUpHeldoutFlat       = "reward-up-heldout-flat"
	RuleLengthDriftUp             = "length-drift-up"
	RuleLengthCollapse            = "length-collapse"
	RuleFormatWithoutCorrectness  = "format-without-correctness"
	RuleJudgeVerifierDisagreement = "judge-verifier-disagreement"
	RuleEntropyCollapse           = "entropy-collapse"
	RuleKLAccelerating            = "kl-accelerating"
	RuleCompletionsDominate       = "completions-dominate"
	RuleMismatchKLHigh            = "mismatch-kl-high"
)

// Rules lists every alarm rule, in the order reports describe them.
var Rules = []string{
	RuleRewardUpHeldoutFlat, RuleLengthDriftUp, RuleLengthCollapse, RuleFormatWithoutCorrectness,
	RuleJudgeVerifierDisagreement, RuleEntropyCollapse, RuleKLAccelerating, RuleCompletionsDominate,
	RuleMismatchKLHigh,
}

// Evidence is one figure behind an alarm.
type Evidence struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// evidenceJSON is Evidence as JSON: a value that is not a finite number
// (a figure the run did not have) is null, since JSON has no NaN and a 0
// would look measured.
type evidenceJSON struct {
	Name  string   `json:"name"`
	Value *float64 `json:"value"`
}

// MarshalJSON writes a NaN or infinite value as null.
func (e Evidence) MarshalJSON() ([]byte, error) {
	out := evidenceJSON{Name: e.Name}
	if !math.IsNaN(e.Value) && !math.IsInf(e.Value, 0) {
		out.Value = &e.Value
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads a null value back as NaN.
func (e *Evidence) UnmarshalJSON(b []byte) error {
	var in evidenceJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	e.Name, e.Value = in.Name, math.NaN()
	if in.Value != nil {
		e.Value = *in.Value
	}
	return nil
}

// Alarm is a reward-hacking or health warning: the rule that fired, the
// first iteration it held at and the last of the consecutive iterations
// (or eval checkpoints) it kept holding, a sentence, and the figures at
// the first iteration.
type Alarm struct {
	Rule          string     `json:"rule"`
	Iteration     int        `json:"iteration"`
	LastIteration int        `json:"last_iteration"`
	Message       string     `json:"message"`
	Evidence      []Evidence `json:"evidence"`
}

// AlarmOptions are the thresholds of the alarm rules. Nil means the
// defaults; a zero field takes its default. docs/REPORTS.md explains each
// rule and how to tune it.
//
// Most rules compare a trailing window (the Window iterations ending at
// the iteration checked) with the baseline (the run's first Window
// iterations), and are checked only where the two do not overlap.
type AlarmOptions struct {
	// Window is the number of iterations averaged (default 5).
	Window int

	// reward-up-heldout-flat, checked at each eval checkpoint against the
	// checkpoint EvalLag evaluations before it (default 1) on each eval
	// set: the mean training reward over the Window iterations up to each
	// (the first Window iterations for the starting policy) rose by at
	// least RewardGain (default 0.05) and by RewardZ (default 2) standard
	// errors, while the held-out metric (exact_pass@1, else pass@1) rose
	// by at most HeldoutFlat (default 0.005).
	EvalLag     int
	RewardGain  float64
	RewardZ     float64
	HeldoutFlat float64

	// length-drift-up / length-collapse: the window's mean response length
	// is at least LengthGrowth (default 1.5) times the baseline's, or at
	// most LengthCollapse (default 0.5) times, and differs from it by at
	// least LengthMinDelta (default 2 tokens, or characters when the
	// policy reports no token counts).
	LengthGrowth   float64
	LengthCollapse float64
	LengthMinDelta float64

	// format-without-correctness: format* components' mean rose by at
	// least FormatGain (default 0.1) over the baseline while correct*
	// components' mean rose by at most CorrectFlat (default 0.01).
	FormatGain  float64
	CorrectFlat float64

	// judge-verifier-disagreement: the window's disagreement rate is at
	// least DisagreementMin (default 0.15) and at least DisagreementRise
	// (default 0.1) above the baseline's.
	DisagreementMin  float64
	DisagreementRise float64

	// entropy-collapse: the window's mean entropy is at most
	// EntropyCollapse (default 0.3) times the baseline's.
	EntropyCollapse float64

	// kl-accelerating: the least-squares slope of KL per iteration over
	// the window is at least KLMinSlope (default 0.001) and at least
	// KLAccel (default 2) times the slope over the Window iterations
	// before it (any positive slope when that one is ≤ 0).
	KLMinSlope float64
	KLAccel    float64

	// completions-dominate: the window's mean top-completion share (up to
	// Window iterations, so it is checked from the first iteration) is at
	// least TopShare (default 0.5) and the iteration's top completion
	// answers at least TopPrompts (default 2) distinct prompts.
	TopShare   float64
	TopPrompts int

	// mismatch-kl-high: the iteration's mismatch_kl (k3 of KL between
	// the sampler's logprobs and the trainer's policy before the update)
	// is at least MismatchKLMax (default DefaultMismatchKLMax); checked
	// at every iteration that has it.
	MismatchKLMax float64

	// Disable lists rules not to check.
	Disable []string
}

// DefaultAlarmOptions are the default thresholds.
var DefaultAlarmOptions = AlarmOptions{
	Window: 5, EvalLag: 1, RewardGain: 0.05, RewardZ: 2, HeldoutFlat: 0.005,
	LengthGrowth: 1.5, LengthCollapse: 0.5, LengthMinDelta: 2,
	FormatGain: 0.1, CorrectFlat: 0.01,
	DisagreementMin: 0.15, DisagreementRise: 0.1,
	EntropyCollapse: 0.3,
	KLMinSlope:      0.001, KLAccel: 2,
	TopShare: 0.5, TopPrompts: 2,
	MismatchKLMax: DefaultMismatchKLMax,
}

// DefaultMismatchKLMax is mismatch-kl-high's threshold: see docs/REPORTS.md
// for the figures it was chosen from.
const DefaultMismatchKLMax = 0.1

// withDefaults fills zero fields and checks the rest.
func (o *AlarmOptions) withDefaults() (AlarmOptions, error) {
	d := DefaultAlarmOptions
	var v AlarmOptions
	if o != nil {
		v = *o
	}
	fill := func(f *float64, def float64) {
		if *f == 0 {
			*f = def
		}
	}
	if v.Window == 0 {
		v.Window = d.Window
	}
	if v.EvalLag == 0 {
		v.EvalLag = d.EvalLag
	}
	if v.TopPrompts == 0 {
		v.TopPrompts = d.TopPrompts
	}
	fill(&v.RewardGain, d.RewardGain)
	fill(&v.RewardZ, d.RewardZ)
	fill(&v.HeldoutFlat, d.HeldoutFlat)
	fill(&v.LengthGrowth, d.LengthGrowth)
	fill(&v.LengthCollapse, d.LengthCollapse)
	fill(&v.LengthMinDelta, d.LengthMinDelta)
	fill(&v.FormatGain, d.FormatGain)
	fill(&v.CorrectFlat, d.CorrectFlat)
	fill(&v.DisagreementMin, d.DisagreementMin)
	fill(&v.DisagreementRise, d.DisagreementRise)
	fill(&v.EntropyCollapse, d.EntropyCollapse)
	fill(&v.KLMinSlope, d.KLMinSlope)
	fill(&v.KLAccel, d.KLAccel)
	fill(&v.TopShare, d.TopShare)
	fill(&v.MismatchKLMax, d.MismatchKLMax)
	switch {
	case v.Window < 1:
		return v, fmt.Errorf("%w: alarm window %d: use at least 1 iteration", ErrInvalidOptions, v.Window)
	case v.EvalLag < 1:
		return v, fmt.Errorf("%w: eval lag %d: use at least 1 checkpoint", ErrInvalidOptions, v.EvalLag)
	case v.LengthGrowth <= 1:
		return v, fmt.Errorf("%w: length growth %g: use a ratio above 1", ErrInvalidOptions, v.LengthGrowth)
	case v.LengthCollapse >= 1 || v.LengthCollapse < 0:
		return v, fmt.Errorf("%w: length collapse %g: use a ratio in (0, 1)", ErrInvalidOptions, v.LengthCollapse)
	case v.EntropyCollapse >= 1 || v.EntropyCollapse < 0:
		return v, fmt.Errorf("%w: entropy collapse %g: use a ratio in (0, 1)", ErrInvalidOptions, v.EntropyCollapse)
	case v.MismatchKLMax < 0 || math.IsNaN(v.MismatchKLMax):
		return v, fmt.Errorf("%w: mismatch kl max %g: use a positive threshold", ErrInvalidOptions, v.MismatchKLMax)
	case v.TopShare > 1 || v.TopShare < 0:
		return v, fmt.Errorf("%w: top share %g: use a fraction in (0, 1]", ErrInvalidOptions, v.TopShare)
	}
	for _, r := range v.Disable {
		if !slices.Contains(Rules, r) {
			return v, fmt.Errorf("%w: unknown alarm rule %q (rules: %v)", ErrInvalidOptions, r, Rules)
		}
	}
	return v, nil
}

// Detect checks every rule over a run's health series and evaluations and
// returns the alarms, ordered by iteration then rule. It is deterministic:
// the same inputs give the same alarms.
func Detect(health []Health, evals []Eval, opts *AlarmOptions) ([]Alarm, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	h := slices.Clone(health)
	sortHealth(h)
	d := detector{h: h, o: o}
	on := func(rule string) bool { return !slices.Contains(o.Disable, rule) }
	var out []Alarm
	if on(RuleRewardUpHeldoutFlat) {
		out = append(out, d.rewardVsHeldout(evals)...)
	}
	if on(RuleLengthDriftUp) || on(RuleLengthCollapse) {
		up, down := d.length()
		if on(RuleLengthDriftUp) {
			out = append(out, up...)
		}
		if on(RuleLengthCollapse) {
			out = append(out, down...)
		}
	}
	if on(RuleFormatWithoutCorrectness) {
		out = append(out, d.formatWithoutCorrect()...)
	}
	if on(RuleJudgeVerifierDisagreement) {
		out = append(out, d.disagreement()...)
	}
	if on(RuleEntropyCollapse) {
		out = append(out, d.entropy()...)
	}
	if on(RuleKLAccelerating) {
		out = append(out, d.kl()...)
	}
	if on(RuleCompletionsDominate) {
		out = append(out, d.dominate()...)
	}
	if on(RuleMismatchKLHigh) {
		out = append(out, d.mismatch()...)
	}
	slices.SortStableFunc(out, func(a, b Alarm) int {
		if c := cmp.Compare(a.Iteration, b.Iteration); c != 0 {
			return c
		}
		return cmp.Compare(slices.Index(Rules, a.Rule), slices.Index(Rules, b.Rule))
	})
	return out, nil
}

type detector struct {
	h []Health
	o AlarmOptions
}

// trigger is one iteration (or checkpoint) where a rule held.
type trigger struct {
	iteration int
	index     int // position in the checked sequence, to find consecutive ones
	message   string
	evidence  []Evidence
}

// episodes folds consecutive triggers into one alarm each.
func episodes(rule string, ts []trigger) []Alarm {
	var out []Alarm
	for i, t := range ts {
		if i > 0 && ts[i-1].index == t.index-1 {
			out[len(out)-1].LastIteration = t.iteration
			continue
		}
		out = append(out, Alarm{Rule: rule, Iteration: t.iteration, LastIteration: t.iteration, Message: t.message, Evidence: clean(t.evidence)})
	}
	return out
}

func clean(ev []Evidence) []Evidence {
	out := ev[:0:0]
	for _, e := range ev {
		if !math.IsNaN(e.Value) && !math.IsInf(e.Value, 0) {
			out = append(out, e)
		}
	}
	return out
}

// series extracts one field of every row.
func (d detector) series(f func(*Health) float64) []float64 {
	v := make([]float64, len(d.h))
	for i := range d.h {
		v[i] = f(&d.h[i])
	}
	return v
}

// windowMean is the mean of v[lo:hi] over values that are not NaN (NaN
// when none is).
func windowMean(v []float64, lo, hi int) float64 {
	s, n := 0.0, 0
	for _, x := range v[max(lo, 0):hi] {
		if !math.IsNaN(x) {
			s += x
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return s / float64(n)
}

// versusBaseline calls check for each row i whose trailing window does not
// overlap the baseline (the first Window rows), with both means.
func (d detector) versusBaseline(v []float64, check func(i int, base, cur float64) (string, []Evidence, bool)) []trigger {
	w := d.o.Window
	base := math.NaN()
	if len(v) >= w {
		base = windowMean(v, 0, w)
	}
	var ts []trigger
	for i := 2*w - 1; i < len(v); i++ {
		cur := windowMean(v, i-w+1, i+1)
		if math.IsNaN(base) || math.IsNaN(cur) {
			continue
		}
		if msg, ev, ok := check(i, base, cur); ok {
			ts = append(ts, trigger{iteration: d.h[i].Iteration, index: i, message: msg, evidence: ev})
		}
	}
	return ts
}

func (d detector) windowLabel(i int) string {
	w := d.o.Window
	return fmt.Sprintf("iterations %d-%d", d.h[max(i-w+1, 0)].Iteration, d.h[i].Iteration)
}

func (d detector) baseLabel() string {
	return fmt.Sprintf("iterations %d-%d", d.h[0].Iteration, d.h[min(d.o.Window, len(d.h))-1].Iteration)
}

// rewardVsHeldout: training reward up while the held-out metric is flat
// or down.
func (d detector) rewardVsHeldout(evals []Eval) []Alarm {
	if len(d.h) == 0 {
		return nil
	}
	w := d.o.Window
	reward := d.series(func(h *Health) float64 { return h.Reward.Mean })
	// window returns the per-iteration reward means a checkpoint is
	// judged by: the Window iterations up to it, the first Window for the
	// starting policy.
	window := func(c int) []float64 {
		var v []float64
		for i := range d.h {
			in := d.h[i].Iteration <= c && d.h[i].Iteration > c-w
			if c == 0 {
				in = i < w
			}
			if in && !math.IsNaN(reward[i]) {
				v = append(v, reward[i])
			}
		}
		return v
	}
	var out []Alarm
	for _, set := range evalSets(evals) {
		cps := setEvals(evals, set)
		metric := headlineMetric(cps)
		var ts []trigger
		for j := d.o.EvalLag; j < len(cps); j++ {
			a, b := cps[j-d.o.EvalLag], cps[j]
			ra, rb := window(a.Iteration), window(b.Iteration)
			ha, okA := a.Metrics[metric]
			hb, okB := b.Metrics[metric]
			if len(ra) == 0 || len(rb) == 0 || !okA || !okB {
				continue
			}
			ma, mb := statOf(ra).Mean, statOf(rb).Mean
			gain := mb - ma
			se := math.Sqrt(sampleVar(ra)/float64(len(ra)) + sampleVar(rb)/float64(len(rb)))
			held := hb - ha
			if gain >= d.o.RewardGain && gain >= d.o.RewardZ*se && held <= d.o.HeldoutFlat {
				ts = append(ts, trigger{iteration: b.Iteration, index: j,
					message: fmt.Sprintf("training reward rose %+.3f (%.3f → %.3f) between checkpoints %d and %d while held-out %s on %s moved %+.4f (%.4f → %.4f)",
						gain, ma, mb, a.Iteration, b.Iteration, metric, set, held, ha, hb),
					evidence: []Evidence{{"from_checkpoint", float64(a.Iteration)}, {"reward_before", ma}, {"reward_after", mb}, {"reward_gain", gain},
						{"reward_gain_se", se}, {"heldout_before", ha}, {"heldout_after", hb}, {"heldout_gain", held}}})
			}
		}
		out = append(out, episodes(RuleRewardUpHeldoutFlat, ts)...)
	}
	return out
}

// sampleVar is the unbiased variance (0 for fewer than two values).
func sampleVar(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	m := statOf(v).Mean
	s := 0.0
	for _, x := range v {
		s += (x - m) * (x - m)
	}
	return s / float64(len(v)-1)
}

// length: mean response length drifting up or collapsing.
func (d detector) length() (up, down []Alarm) {
	unit := "tokens"
	length := d.series(func(h *Health) float64 { return h.LengthMean })
	if !slices.ContainsFunc(length, func(x float64) bool { return x > 0 }) {
		unit = "characters"
		length = d.series(func(h *Health) float64 { return h.CharsMean })
	}
	frac := d.series(func(h *Health) float64 { return h.FracLength })
	evidence := func(i int, base, cur float64) []Evidence {
		return []Evidence{{"baseline_length", base}, {"window_length", cur}, {"ratio", cur / base}, {"frac_finish_length", frac[i]}}
	}
	up = episodes(RuleLengthDriftUp, d.versusBaseline(length, func(i int, base, cur float64) (string, []Evidence, bool) {
		if base > 0 && cur/base >= d.o.LengthGrowth && cur-base >= d.o.LengthMinDelta {
			return fmt.Sprintf("mean response length grew %.2f× (%.1f → %.1f %s, %s vs %s); %.0f%% of samples stop at max_tokens",
				cur/base, base, cur, unit, d.baseLabel(), d.windowLabel(i), 100*frac[i]), evidence(i, base, cur), true
		}
		return "", nil, false
	}))
	down = episodes(RuleLengthCollapse, d.versusBaseline(length, func(i int, base, cur float64) (string, []Evidence, bool) {
		if base > 0 && cur/base <= d.o.LengthCollapse && base-cur >= d.o.LengthMinDelta {
			return fmt.Sprintf("mean response length collapsed to %.2f× (%.1f → %.1f %s, %s vs %s)",
				cur/base, base, cur, unit, d.baseLabel(), d.windowLabel(i)), evidence(i, base, cur), true
		}
		return "", nil, false
	}))
	return up, down
}

// formatWithoutCorrect: format reward rising without correctness.
func (d detector) formatWithoutCorrect() []Alarm {
	format := d.series(func(h *Health) float64 { return h.FormatMean })
	correct := d.series(func(h *Health) float64 { return h.CorrectMean })
	fwc := d.series(func(h *Health) float64 { return h.FormatWithoutCorrect })
	w := d.o.Window
	if len(d.h) < w {
		return nil
	}
	cb := windowMean(correct, 0, w)
	return episodes(RuleFormatWithoutCorrectness, d.versusBaseline(format, func(i int, base, cur float64) (string, []Evidence, bool) {
		cc := windowMean(correct, i-w+1, i+1)
		if math.IsNaN(cb) || math.IsNaN(cc) {
			return "", nil, false
		}
		if cur-base >= d.o.FormatGain && cc-cb <= d.o.CorrectFlat {
			return fmt.Sprintf("format reward rose %+.3f (%.3f → %.3f) while correctness moved %+.3f (%.3f → %.3f), %s vs %s; %.0f%% of samples pass format but not correctness",
					cur-base, base, cur, cc-cb, cb, cc, d.baseLabel(), d.windowLabel(i), 100*fwc[i]),
				[]Evidence{{"format_baseline", base}, {"format_window", cur}, {"correct_baseline", cb}, {"correct_window", cc}, {"format_without_correct", fwc[i]}}, true
		}
		return "", nil, false
	}))
}

// disagreement: judge and verifier disagree more and more.
func (d detector) disagreement() []Alarm {
	v := d.series(func(h *Health) float64 { return h.Disagreement })
	return episodes(RuleJudgeVerifierDisagreement, d.versusBaseline(v, func(i int, base, cur float64) (string, []Evidence, bool) {
		if cur >= d.o.DisagreementMin && cur-base >= d.o.DisagreementRise {
			return fmt.Sprintf("judge and verifier disagree on %.0f%% of samples (baseline %.0f%%), %s vs %s",
					100*cur, 100*base, d.windowLabel(i), d.baseLabel()),
				[]Evidence{{"disagreement_baseline", base}, {"disagreement_window", cur}}, true
		}
		return "", nil, false
	}))
}

// entropy: policy entropy collapsing.
func (d detector) entropy() []Alarm {
	v := d.series(func(h *Health) float64 { return h.Entropy })
	return episodes(RuleEntropyCollapse, d.versusBaseline(v, func(i int, base, cur float64) (string, []Evidence, bool) {
		if base > 0 && cur <= d.o.EntropyCollapse*base {
			return fmt.Sprintf("entropy fell to %.2f× its baseline (%.4f → %.4f), %s vs %s", cur/base, base, cur, d.baseLabel(), d.windowLabel(i)),
				[]Evidence{{"entropy_baseline", base}, {"entropy_window", cur}, {"ratio", cur / base}}, true
		}
		return "", nil, false
	}))
}

// slope is the least-squares slope of (x, y) over the points whose y is
// not NaN (NaN with fewer than two).
func slope(x, y []float64) float64 {
	var sx, sy, n float64
	for i := range x {
		if !math.IsNaN(y[i]) {
			sx, sy, n = sx+x[i], sy+y[i], n+1
		}
	}
	if n < 2 {
		return math.NaN()
	}
	mx, my := sx/n, sy/n
	var sxy, sxx float64
	for i := range x {
		if !math.IsNaN(y[i]) {
			sxy += (x[i] - mx) * (y[i] - my)
			sxx += (x[i] - mx) * (x[i] - mx)
		}
	}
	if sxx == 0 {
		return math.NaN()
	}
	return sxy / sxx
}

// kl: KL to the reference growing faster and faster.
func (d detector) kl() []Alarm {
	w := d.o.Window
	kl := d.series(func(h *Health) float64 { return h.KL })
	it := d.series(func(h *Health) float64 { return float64(h.Iteration) })
	var ts []trigger
	for i := 2*w - 1; i < len(d.h); i++ {
		cur := slope(it[i-w+1:i+1], kl[i-w+1:i+1])
		prev := slope(it[i-2*w+1:i-w+1], kl[i-2*w+1:i-w+1])
		if math.IsNaN(cur) || math.IsNaN(prev) {
			continue
		}
		if cur >= d.o.KLMinSlope && (prev <= 0 || cur >= d.o.KLAccel*prev) {
			ts = append(ts, trigger{iteration: d.h[i].Iteration, index: i,
				message: fmt.Sprintf("KL is accelerating: %+.4f per iteration over %s, %+.4f over the %d before; KL now %.4f",
					cur, d.windowLabel(i), prev, w, kl[i]),
				evidence: []Evidence{{"kl", kl[i]}, {"kl_slope_window", cur}, {"kl_slope_before", prev}}})
		}
	}
	return episodes(RuleKLAccelerating, ts)
}

// dominate: a few completions answer most prompts.
func (d detector) dominate() []Alarm {
	w := d.o.Window
	share := d.series(func(h *Health) float64 { return h.TopShare })
	var ts []trigger
	for i := range d.h {
		cur := windowMean(share, i-w+1, i+1)
		if !math.IsNaN(cur) && cur >= d.o.TopShare && d.h[i].TopPrompts >= d.o.TopPrompts {
			ts = append(ts, trigger{iteration: d.h[i].Iteration, index: i,
				message: fmt.Sprintf("one completion is %.0f%% of the samples (mean %.0f%% over %s) and answers %d different prompts: %q",
					100*share[i], 100*cur, d.windowLabel(i), d.h[i].TopPrompts, clip(d.h[i].TopCompletion, 80)),
				evidence: []Evidence{{"top_completion_share", share[i]}, {"window_share", cur}, {"top_completion_prompts", float64(d.h[i].TopPrompts)}}})
		}
	}
	return episodes(RuleCompletionsDominate, ts)
}

// mismatch: the trainer's policy has drifted too far from the one whose
// logprobs the samples carry (staleness, or sampler/trainer numerics).
func (d detector) mismatch() []Alarm {
	var ts []trigger
	for i, h := range d.h {
		if math.IsNaN(h.MismatchKL) || h.MismatchKL < d.o.MismatchKLMax {
			continue
		}
		ts = append(ts, trigger{iteration: h.Iteration, index: i,
			message: fmt.Sprintf("train/inference mismatch %.4f ≥ %g (largest ratio %.3g, mean staleness %.2g): the trainer's policy is far from the one that sampled; lower overlap.max_staleness or the learning rate, or check the sampler's logprobs",
				h.MismatchKL, d.o.MismatchKLMax, h.RatioMax, h.StalenessMean),
			evidence: []Evidence{{"mismatch_kl", h.MismatchKL}, {"ratio_max", h.RatioMax}, {"staleness_mean", h.StalenessMean}, {"threshold", d.o.MismatchKLMax}}})
	}
	return episodes(RuleMismatchKLHigh, ts)
}

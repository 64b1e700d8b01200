package tables

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
)

// RescoreReport is what a rescoring did: the JSON object it commits on
// its branch (at runs.RescoreReportPath), which `rlpipe rescore` prints and reports read.
type RescoreReport struct {
	From       string `json:"from"`
	FromCommit string `json:"from_commit"`
	Branch     string `json:"branch"`
	// Commit is the commit that holds the new rewards; the stored
	// reports/rescore.json, written into that commit, cannot name it and
	// leaves it out.
	Commit     string           `json:"commit,omitempty"`
	SpecDigest string           `json:"spec_digest"`
	Iterations []int            `json:"iterations"`
	Cached     int              `json:"cached_iterations"`
	Comparison RewardComparison `json:"comparison"`
}

// RewardStats describe one reward column's distribution over scored rows.
type RewardStats struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	Std  float64 `json:"std"`
	Min  float64 `json:"min"`
	P10  float64 `json:"p10"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	Max  float64 `json:"max"`
}

// ComponentShift compares a component (or "total") before and after.
type ComponentShift struct {
	Name string       `json:"name"`
	Old  *RewardStats `json:"old,omitempty"` // nil when the old spec had no such component
	New  *RewardStats `json:"new,omitempty"` // nil when the new spec has none
}

// RewardChange is one sample whose total reward moved.
type RewardChange struct {
	Iteration   int     `json:"iteration"`
	PromptID    string  `json:"prompt_id"`
	SampleIndex int32   `json:"sample_index"`
	Old         float64 `json:"old"`
	New         float64 `json:"new"`
	Delta       float64 `json:"delta"`
}

// ByChange orders changes by |Δ|, largest first, then by iteration
// (oldest first, or newest first with newestFirst), prompt id and sample
// index. CompareRewards lists its Top oldest first; a report that shows
// a few of many equal changes lists the newest.
func ByChange(newestFirst bool) func(a, b RewardChange) int {
	return func(a, b RewardChange) int {
		if d := cmp.Compare(math.Abs(b.Delta), math.Abs(a.Delta)); d != 0 {
			return d
		}
		d := cmp.Compare(a.Iteration, b.Iteration)
		if newestFirst {
			d = -d
		}
		if d != 0 {
			return d
		}
		if d := cmp.Compare(a.PromptID, b.PromptID); d != 0 {
			return d
		}
		return cmp.Compare(a.SampleIndex, b.SampleIndex)
	}
}

// RewardComparison is what a rescoring changed.
type RewardComparison struct {
	Samples int `json:"samples"`
	// Scored counts samples with a total on both sides; the rest were
	// skipped (a failed rollout) or errored on one side.
	Scored     int              `json:"scored"`
	Components []ComponentShift `json:"components"`
	// Changed counts scored samples whose total moved (|Δ| > 1e-12).
	Changed int            `json:"changed"`
	Top     []RewardChange `json:"top_changes"`
	// Spearman is the rank correlation of old and new totals (NaN when
	// either side is constant; null in JSON).
	Spearman float64 `json:"spearman"`
	// Groups are the (iteration, prompt) groups; the next fields count how
	// many of them change between zero and non-zero reward variance —
	// groups that GRPO skips (zero variance) and that carry signal.
	Groups              int `json:"groups"`
	ZeroToNonzeroGroups int `json:"zero_to_nonzero_variance_groups"`
	NonzeroToZeroGroups int `json:"nonzero_to_zero_variance_groups"`
}

// IterationRewards is one rewards table of one iteration.
type IterationRewards struct {
	Iteration int
	Rows      []Reward
}

type rewardKey struct {
	it  int
	pid string
	idx int32
}

// CompareRewards matches old and new rows by (iteration, prompt, sample) and
// summarises the difference. topK bounds the listed changes.
func CompareRewards(old, new []IterationRewards, topK int) RewardComparison {
	oldRows := map[rewardKey]*Reward{}
	var order []rewardKey
	for _, s := range old {
		for i := range s.Rows {
			k := rewardKey{s.Iteration, s.Rows[i].PromptID, s.Rows[i].SampleIndex}
			oldRows[k] = &s.Rows[i]
		}
	}
	newRows := map[rewardKey]*Reward{}
	for _, s := range new {
		for i := range s.Rows {
			k := rewardKey{s.Iteration, s.Rows[i].PromptID, s.Rows[i].SampleIndex}
			newRows[k] = &s.Rows[i]
			order = append(order, k)
		}
	}
	var c RewardComparison
	c.Samples = len(order)
	comps := map[string][2][]float64{}
	add := func(side int, name string, v float64) {
		p := comps[name]
		p[side] = append(p[side], v)
		comps[name] = p
	}
	var oldT, newT []float64
	var changes []RewardChange
	groupVals := map[[2]any][2][]float64{}
	for _, k := range order {
		n := newRows[k]
		o, ok := oldRows[k]
		if !ok || !o.Scored() || !n.Scored() {
			continue
		}
		c.Scored++
		oldT, newT = append(oldT, o.Total), append(newT, n.Total)
		add(0, "total", o.Total)
		add(1, "total", n.Total)
		for name, v := range o.Components {
			add(0, name, v)
		}
		for name, v := range n.Components {
			add(1, name, v)
		}
		if d := n.Total - o.Total; math.Abs(d) > 1e-12 {
			c.Changed++
			changes = append(changes, RewardChange{Iteration: k.it, PromptID: k.pid, SampleIndex: k.idx, Old: o.Total, New: n.Total, Delta: d})
		}
		g := [2]any{k.it, k.pid}
		gv := groupVals[g]
		gv[0], gv[1] = append(gv[0], o.Total), append(gv[1], n.Total)
		groupVals[g] = gv
	}
	names := make([]string, 0, len(comps))
	for n := range comps {
		if n != "total" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	names = append(names, "total")
	for _, n := range names {
		p := comps[n]
		c.Components = append(c.Components, ComponentShift{Name: n, Old: rewardStats(p[0]), New: rewardStats(p[1])})
	}
	slices.SortFunc(changes, ByChange(false))
	if len(changes) > topK {
		changes = changes[:topK]
	}
	c.Top = changes
	c.Spearman = spearman(oldT, newT)
	c.Groups = len(groupVals)
	for _, gv := range groupVals {
		zo, zn := variance(gv[0]) == 0, variance(gv[1]) == 0
		switch {
		case zo && !zn:
			c.ZeroToNonzeroGroups++
		case !zo && zn:
			c.NonzeroToZeroGroups++
		}
	}
	return c
}

func rewardStats(v []float64) *RewardStats {
	if len(v) == 0 {
		return nil
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	mean := 0.0
	for _, x := range s {
		mean += x
	}
	mean /= float64(len(s))
	q := func(p float64) float64 { return s[int(math.Round(p*float64(len(s)-1)))] }
	return &RewardStats{N: len(s), Mean: mean, Std: math.Sqrt(variance(s)), Min: s[0], P10: q(0.1), P50: q(0.5), P90: q(0.9), Max: s[len(s)-1]}
}

// variance is the population variance.
func variance(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	_, s2 := MeanVariance(v)
	return s2
}

// MeanVariance is the mean and population variance of v (zeros for
// none): advantages' group statistics and the rescore report's.
func MeanVariance(v []float64) (mean, variance float64) {
	if len(v) == 0 {
		return 0, 0
	}
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(v))
}

// ranks gives average ranks (ties share the mean of their positions).
func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] < v[idx[b]] })
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		avg := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = avg
		}
		i = j + 1
	}
	return r
}

// spearman is Pearson's correlation of the ranks.
func spearman(a, b []float64) float64 {
	if len(a) != len(b) || len(a) < 2 {
		return math.NaN()
	}
	ra, rb := ranks(a), ranks(b)
	ma, mb := 0.0, 0.0
	for i := range ra {
		ma += ra[i]
		mb += rb[i]
	}
	ma /= float64(len(ra))
	mb /= float64(len(rb))
	var sab, saa, sbb float64
	for i := range ra {
		da, db := ra[i]-ma, rb[i]-mb
		sab += da * db
		saa += da * da
		sbb += db * db
	}
	if saa == 0 || sbb == 0 {
		return math.NaN()
	}
	return sab / math.Sqrt(saa*sbb)
}

// MarshalJSON writes Spearman as null when it is NaN (JSON has no NaN).
func (c RewardComparison) MarshalJSON() ([]byte, error) {
	type plain RewardComparison
	var rho *float64
	if !math.IsNaN(c.Spearman) {
		rho = &c.Spearman
	}
	return json.Marshal(struct {
		plain
		Spearman *float64 `json:"spearman"`
	}{plain(c), rho})
}

// UnmarshalJSON reads a null Spearman back as NaN.
func (c *RewardComparison) UnmarshalJSON(b []byte) error {
	type plain RewardComparison
	var v struct {
		plain
		Spearman *float64 `json:"spearman"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*c = RewardComparison(v.plain)
	c.Spearman = math.NaN()
	if v.Spearman != nil {
		c.Spearman = *v.Spearman
	}
	return nil
}

// String summarises the comparison in one line.
func (c RewardComparison) String() string {
	return fmt.Sprintf("%d samples (%d scored on both sides), %d changed, spearman %.3f, %d of %d groups gain reward variance, %d lose it",
		c.Samples, c.Scored, c.Changed, c.Spearman, c.ZeroToNonzeroGroups, c.Groups, c.NonzeroToZeroGroups)
}

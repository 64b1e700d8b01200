package tables

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// ComponentPrefix starts the name of each reward component column: the
// component "correct" is the nullable float64 column "r_correct".
const ComponentPrefix = "r_"

// RewardsWith returns the rewards table with one r_<name> column per
// component, in the order given. Names are lower-case letters, digits and
// underscores, starting with a letter.
func RewardsWith(components ...string) (*Table[Reward], error) {
	return Rewards.extend(components)
}

// IsComponentName reports whether n can name a reward component (and so
// a column of the rewards table): lower-case letters, digits and
// underscores, starting with a letter. The reward spec holds its
// component, verifier and judge names to the same rule.
func IsComponentName(n string) bool {
	ok := n != "" && n[0] >= 'a' && n[0] <= 'z'
	for i := 0; ok && i < len(n); i++ {
		c := n[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
	}
	return ok
}

func validComponent(n string) error {
	if !IsComponentName(n) {
		return fmt.Errorf("reward component name %q: use lower-case letters, digits and _, starting with a letter: %w", n, errInvalid)
	}
	return nil
}

func componentCol(name string) column[Reward] {
	return column[Reward]{
		field: arrow.Field{Name: ComponentPrefix + name, Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		doc:   "reward component " + name + "; null when the component was not computed",
		enc: func(b array.Builder) func(*Reward) {
			fb := b.(*array.Float64Builder)
			return func(r *Reward) {
				if v, ok := r.Components[name]; ok {
					fb.Append(v)
				} else {
					fb.AppendNull()
				}
			}
		},
		dec: func(a arrow.Array) func(int, *Reward) {
			fa := a.(*array.Float64)
			return func(i int, r *Reward) {
				if fa.IsNull(i) {
					return
				}
				if r.Components == nil {
					r.Components = make(map[string]float64)
				}
				r.Components[name] = fa.Value(i)
			}
		},
	}
}

func collectComponents(rows []Reward) []string {
	seen := map[string]bool{}
	for i := range rows {
		for n := range rows[i].Components {
			seen[n] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func checkComponents(names map[string]bool, r *Reward) error {
	for n := range r.Components {
		if !names[n] {
			have := make([]string, 0, len(names))
			for k := range names {
				have = append(have, k)
			}
			slices.Sort(have)
			return fmt.Errorf("reward component %q has no column (the file has %v; list every component in RewardsWith): %w", n, have, errInvalid)
		}
	}
	return nil
}

// RewardNonfinite is the status of a reward row whose reward came out NaN
// or infinite (a component, the total, a judge's score): the row is not
// scored, and never averaged as 0. The error column says which part and
// which value. A batch where no row is scored and some are non-finite
// has nothing to train on: CheckFinite.
const RewardNonfinite = "nonfinite"

// NonfiniteError is a batch of rewards that has nothing to train on: no
// row is scored, and some rows' rewards came out NaN or infinite. It
// names the first such row. It matches ErrNoFiniteReward with errors.Is.
type NonfiniteError struct {
	// Nonfinite rows of Scorable, the rows whose trajectory was scored
	// (not skipped).
	Nonfinite, Scorable int64
	// The first non-finite row, and which part was not finite with its
	// value ("component ratio: the value is +Inf").
	PromptID    string
	SampleIndex int32
	Reason      string
}

func (e *NonfiniteError) Error() string {
	return fmt.Sprintf("no sample has a finite reward (%d of %d are NaN or infinite; the first, prompt %s sample %d: %s): "+
		"make every component and the total finite on every row, e.g. guard divisions and logarithms in the reward spec, and check the scores of its judges",
		e.Nonfinite, e.Scorable, e.PromptID, e.SampleIndex, e.Reason)
}

func (e *NonfiniteError) Unwrap() error { return ErrNoFiniteReward }

// CheckFinite returns a *NonfiniteError when no row of rows is scored
// (Reward.Scored) and some row's reward is not finite (Outcome
// RewardNonfinite); nil otherwise. Rows skipped for their trajectory's
// status ("skipped: …") do not count as scorable.
func CheckFinite(rows []Reward) error {
	var e *NonfiniteError
	var scorable int64
	for i := range rows {
		r := &rows[i]
		if r.Scored() {
			return nil
		}
		if !strings.HasPrefix(r.Status, "skipped") {
			scorable++
		}
		if r.Outcome() != RewardNonfinite {
			continue
		}
		if e == nil {
			e = &NonfiniteError{PromptID: r.PromptID, SampleIndex: r.SampleIndex, Reason: nonfiniteReason(r)}
		}
		e.Nonfinite++
	}
	if e == nil {
		return nil
	}
	e.Scorable = scorable
	return e
}

// nonfiniteReason is what a non-finite row says of itself: its error, or
// the value of its total.
func nonfiniteReason(r *Reward) string {
	if r.Error != nil && *r.Error != "" {
		return *r.Error
	}
	return fmt.Sprintf("total: the value is %v", r.Total)
}

package tables

import (
	"fmt"
	"slices"
	"sort"

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

func validComponent(n string) error {
	ok := n != "" && n[0] >= 'a' && n[0] <= 'z'
	for i := 0; ok && i < len(n); i++ {
		c := n[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
	}
	if !ok {
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

package datasets

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// TestShares splits rows by weight with the largest remainder, the first
// family first on a tie, and always hands out every row.
func TestShares(t *testing.T) {
	for _, tc := range []struct {
		name    string
		total   int
		weights []float64
		want    []int
	}{
		{"one family", 7, []float64{1}, []int{7}},
		{"even", 10, []float64{1, 1}, []int{5, 5}},
		{"odd row to the first", 5, []float64{1, 1}, []int{3, 2}},
		{"three to one", 5, []float64{3, 1}, []int{4, 1}},
		{"three to one, train", 15, []float64{3, 1}, []int{11, 4}},
		{"fewer rows than families", 2, []float64{1, 1, 1}, []int{1, 1, 0}},
		{"fractional weights", 10, []float64{0.5, 0.25, 0.25}, []int{5, 3, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := shares(tc.total, tc.weights); !slices.Equal(got, tc.want) {
				t.Fatalf("shares(%d, %v) = %v, want %v", tc.total, tc.weights, got, tc.want)
			}
		})
	}
}

// TestInterleave spreads each family's rows evenly through the table, in
// each family's own order.
func TestInterleave(t *testing.T) {
	fam := func(name string, n int) []tables.Prompt {
		out := make([]tables.Prompt, n)
		for i := range out {
			out[i].PromptID = fmt.Sprintf("%s%d", name, i)
		}
		return out
	}
	ids := func(rows []tables.Prompt) string {
		var s []string
		for _, r := range rows {
			s = append(s, r.PromptID)
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		name string
		fams [][]tables.Prompt
		want string
	}{
		{"one family", [][]tables.Prompt{fam("a", 3)}, "a0 a1 a2"},
		{"equal", [][]tables.Prompt{fam("a", 2), fam("b", 2)}, "a0 b0 a1 b1"},
		{"three to one", [][]tables.Prompt{fam("a", 6), fam("b", 2)}, "a0 a1 b0 a2 a3 a4 b1 a5"},
		{"an empty family", [][]tables.Prompt{fam("a", 2), nil, fam("c", 1)}, "a0 c0 a1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(interleave(tc.fams)); got != tc.want {
				t.Fatalf("interleave = %s, want %s", got, tc.want)
			}
		})
	}
}

// FuzzGymFlags: any family list and --config argument parse or fail with
// ErrBadConfig, never panic, and what parses is usable: named families
// with positive finite weights, config values JSON can carry.
func FuzzGymFlags(f *testing.F) {
	for _, s := range [][2]string{
		{"chain_sum", "max_terms=3"}, {"a:2,b:0.5", "a.x=[1,{\"y\":true}]"}, {"a,,b", "=1"}, {"a:NaN", "seed=1"},
		{"a:1e309", "a.b.c=d"}, {"a", "k=1e400"}, {" a ", "k=-0"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, list, arg string) {
		fams, err := ParseGymFamilies(list)
		if err != nil {
			if !errors.Is(err, ErrBadConfig) {
				t.Fatalf("ParseGymFamilies(%q): %v is not ErrBadConfig", list, err)
			}
			return
		}
		for _, fam := range fams {
			if fam.Name == "" || !(fam.Weight > 0) || math.IsInf(fam.Weight, 0) {
				t.Fatalf("ParseGymFamilies(%q) = %+v", list, fams)
			}
		}
		if err := SetGymConfig(fams, arg); err != nil {
			if !errors.Is(err, ErrBadConfig) {
				t.Fatalf("SetGymConfig(%q): %v is not ErrBadConfig", arg, err)
			}
			return
		}
		if _, err := json.Marshal(fams); err != nil {
			t.Fatalf("SetGymConfig(%q) gave config JSON cannot carry: %v", arg, err)
		}
	})
}

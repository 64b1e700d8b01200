package tables

import (
	"fmt"
	"testing"
)

func TestCompareAdvantages(t *testing.T) {
	adv := func(p string, i int32, a float64, mask bool) Advantage {
		return Advantage{PromptID: p, SampleIndex: i, Advantage: a, Mask: mask}
	}
	for _, c := range []struct {
		name     string
		old, new []Advantage
		// samples compared spearman flips share mean|Δ| groups gmOld gmNew mOld mNew
		want string
	}{
		{"identical",
			[]Advantage{adv("a", 0, -1, false), adv("a", 1, 1, false)},
			[]Advantage{adv("a", 0, -1, false), adv("a", 1, 1, false)},
			"2 2 1.0000 0 0.0000 0.0000 1 0 0 0 0"},
		{"scaled, same ranks",
			[]Advantage{adv("a", 0, -1, false), adv("a", 1, 0, false), adv("a", 2, 1, false)},
			[]Advantage{adv("a", 0, -1.5, false), adv("a", 1, 0, false), adv("a", 2, 1.5, false)},
			"3 3 1.0000 0 0.0000 0.3333 1 0 0 0 0"},
		{"a flip, a zero flips nothing",
			[]Advantage{adv("a", 0, -1, false), adv("a", 1, 0, false), adv("a", 2, 2, false), adv("a", 3, 1, false)},
			[]Advantage{adv("a", 0, 1, false), adv("a", 1, 1, false), adv("a", 2, 2, false), adv("a", 3, 0, false)},
			"4 4 0.3162 1 0.2500 1.0000 1 0 0 0 0"},
		{"masked and missing rows are not compared",
			[]Advantage{adv("a", 0, 1, false), adv("a", 1, -1, false), adv("b", 0, 0, true), adv("b", 1, 0, true), adv("c", 0, 2, false)},
			[]Advantage{adv("a", 0, 2, false), adv("a", 1, -2, false), adv("b", 0, 0, true), adv("b", 1, 0, true)},
			"5 2 1.0000 0 0.0000 1.0000 3 1 2 2 3"},
		{"nothing compared: no rank correlation",
			[]Advantage{adv("a", 0, 0, true)},
			[]Advantage{adv("a", 0, 0, true)},
			"1 0 nil 0 0.0000 0.0000 1 1 1 1 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := CompareAdvantages(c.old, c.new)
			rho := "nil"
			if got.Spearman != nil {
				rho = fmt.Sprintf("%.4f", *got.Spearman)
			}
			s := fmt.Sprintf("%d %d %s %d %.4f %.4f %d %d %d %d %d", got.Samples, got.Compared, rho, got.SignFlips, got.SignFlipShare, got.MeanAbsDelta,
				got.Groups, got.GroupsMaskedOld, got.GroupsMaskedNew, got.MaskedOld, got.MaskedNew)
			if s != c.want {
				t.Errorf("got %q, want %q", s, c.want)
			}
		})
	}
}

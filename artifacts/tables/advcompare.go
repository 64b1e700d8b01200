package tables

import "math"

// AdvantageComparison is how one iteration's advantages under another
// estimator differ from the stored ones (rlpipe rescore --advantages).
// Rows are matched by (prompt id, sample index); the figures over rows
// are over the Compared rows, those that neither side masks.
type AdvantageComparison struct {
	// Samples is the number of rows of the stored table.
	Samples int `json:"samples"`
	// Compared rows are unmasked under both.
	Compared int `json:"compared"`
	// Spearman is the rank correlation of the stored and the new
	// advantages over the Compared rows; nil when it is undefined (fewer
	// than two rows, or one side constant).
	Spearman *float64 `json:"spearman"`
	// SignFlips count the Compared rows whose advantage changes sign
	// (one positive, the other negative; a zero flips nothing), and
	// SignFlipShare is SignFlips / Compared (0 when nothing is compared).
	SignFlips     int     `json:"sign_flips"`
	SignFlipShare float64 `json:"sign_flip_share"`
	// MeanAbsDelta is the mean of |new − stored| over the Compared rows.
	MeanAbsDelta float64 `json:"mean_abs_delta"`
	// Groups counts the prompts; GroupsMaskedOld and GroupsMaskedNew
	// those whose every sample is masked under the stored and the new
	// advantages (no gradient from that prompt).
	Groups          int `json:"groups"`
	GroupsMaskedOld int `json:"groups_masked_old"`
	GroupsMaskedNew int `json:"groups_masked_new"`
	// MaskedOld and MaskedNew count the masked rows under each.
	MaskedOld int `json:"masked_old"`
	MaskedNew int `json:"masked_new"`
}

// CompareAdvantages compares new advantages with the stored old ones of
// the same iteration. A row of old that new lacks counts as masked under
// new.
func CompareAdvantages(old, new []Advantage) AdvantageComparison {
	type key struct {
		prompt string
		sample int32
	}
	byKey := make(map[key]Advantage, len(new))
	for _, a := range new {
		byKey[key{a.PromptID, a.SampleIndex}] = a
	}
	c := AdvantageComparison{Samples: len(old)}
	var order []string
	live := map[string][2]bool{} // per prompt: some row unmasked under old, under new
	var o, n []float64
	var sumAbs float64
	for _, a := range old {
		b, ok := byKey[key{a.PromptID, a.SampleIndex}]
		newMasked := !ok || b.Mask
		g, seen := live[a.PromptID]
		if !seen {
			order = append(order, a.PromptID)
		}
		g[0] = g[0] || !a.Mask
		g[1] = g[1] || !newMasked
		live[a.PromptID] = g
		if a.Mask {
			c.MaskedOld++
		}
		if newMasked {
			c.MaskedNew++
		}
		if a.Mask || newMasked {
			continue
		}
		o, n = append(o, a.Advantage), append(n, b.Advantage)
		sumAbs += math.Abs(b.Advantage - a.Advantage)
		if a.Advantage*b.Advantage < 0 {
			c.SignFlips++
		}
	}
	c.Groups = len(order)
	for _, p := range order {
		if !live[p][0] {
			c.GroupsMaskedOld++
		}
		if !live[p][1] {
			c.GroupsMaskedNew++
		}
	}
	c.Compared = len(o)
	if c.Compared > 0 {
		c.SignFlipShare = float64(c.SignFlips) / float64(c.Compared)
		c.MeanAbsDelta = sumAbs / float64(c.Compared)
	}
	if rho := spearman(o, n); !math.IsNaN(rho) {
		c.Spearman = &rho
	}
	return c
}

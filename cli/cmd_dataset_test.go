package cli

import "testing"

// TestDatasetArithBounds refuses counts it cannot draw, instead of
// drawing forever for more distinct problems than there are.
func TestDatasetArithBounds(t *testing.T) {
	h := newStore(t)
	for _, args := range [][]string{
		{"--train", "0"},
		{"--train", "1000000"},
		{"--heldout", "0"},
	} {
		h.fails(ExitUsage, []string{"--train must be in 1..", "--heldout in 1.."}, append([]string{"dataset", "arith", "main"}, args...)...)
	}
}

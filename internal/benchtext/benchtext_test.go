package benchtext_test

import (
	"math/rand/v2"
	"testing"

	"github.com/rlpipe/rlpipe/internal/benchtext"
)

// TestTextIsSeeded: the same seeds give the same words (pinned, so that
// the benchmarks' tables stay the same), and each text is the shortest
// run of words that reaches n bytes.
func TestTextIsSeeded(t *testing.T) {
	cases := []struct {
		name string
		n    int
		want string // "" to check the length only
	}{
		{"one word", 1, "qkh"},
		{"a sentence", 40, "qkh qvysto utgzc zxpqrsb bwszbelwh hqtrmqj"},
		{"a completion", 590, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]string
			for i := range got {
				r := rand.New(rand.NewPCG(1, 2))
				got[i] = benchtext.New(r).Text(rand.New(rand.NewPCG(3, 7)), tc.n)
			}
			if got[0] != got[1] {
				t.Fatalf("same seeds, different text:\n%q\n%q", got[0], got[1])
			}
			if tc.want != "" && got[0] != tc.want {
				t.Errorf("text %q, want %q", got[0], tc.want)
			}
			last := len(got[0]) - 1
			for last >= 0 && got[0][last] != ' ' {
				last--
			}
			if len(got[0]) < tc.n || (last >= 0 && last >= tc.n) {
				t.Errorf("%d bytes (last word from %d) for n = %d: %q", len(got[0]), last+1, tc.n, got[0])
			}
		})
	}
}

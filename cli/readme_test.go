package cli

import (
	"regexp"
	"strings"
	"testing"
)

// The README's sample of `make demo` output is what the binary prints (its
// `rlpipe run` and `rlpipe status`): a
// small run of the same example gives lines of the same shape (numbers
// aside: the demo runs longer, on more problems, with more k).
func TestREADMESampleIsWhatRunPrints(t *testing.T) {
	readme := readFile(t, "../README.md")
	h := newStore(t)
	h.ok("dataset", "arith", "main", "--train", "256", "--heldout", "50")
	out := h.ok("run", "-f", h.file("pipeline.yaml", smallArithConfig(t)), "--no-report")
	out += h.ok("status", "arith") // the demo's next command prints the last line

	number := regexp.MustCompile(`[-+]?\d+(\.\d+)?`)
	shape := func(line string) string { return number.ReplaceAllString(line, "N") }
	// The line that starts with prefix, and the part of it to compare
	// (the eval lines up to their second metric: the demo asks more k).
	find := func(text, prefix string, cut int) string {
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, prefix) {
				s := shape(line)
				if cut > 0 {
					parts := strings.SplitN(s, "  ", cut+1)
					s = strings.Join(parts[:min(cut, len(parts))], "  ")
				}
				return s
			}
		}
		return ""
	}
	for _, c := range []struct {
		prefix string
		cut    int
	}{
		{"iteration 1: ", 0},
		{"  eval base on heldout", 2},
		{"heldout exact_pass@1: ", 0},
	} {
		want, got := find(readme, c.prefix, c.cut), find(out, c.prefix, c.cut)
		if want == "" || got != want {
			t.Errorf("README sample line %q\nrlpipe run prints  %q\n(numbers shown as N)", want, got)
		}
	}
}

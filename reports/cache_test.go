package reports

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/runs"
)

// TestLoadCache: a Load with a Cache returns what a Load without one
// does, and reads again only the iterations whose files or options
// changed since the last Load: none when nothing was committed; after a
// new iteration, that iteration and the one that left the last
// SampleIterations (its samples are no longer kept).
func TestLoadCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := lengthHackStore(t, "runs-hack", 12, lengthHackingEvals())
	cache := &Cache{}
	steps := []struct {
		name   string
		commit int // an iteration to commit before the Load, 0 for none
		want   []int
	}{
		{name: "first load reads every iteration", want: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		{name: "nothing committed reads no iteration", want: nil},
		{name: "a new iteration reads it and the one whose samples go", commit: 13, want: []int{3, 13}},
	}
	for _, s := range steps {
		if s.commit > 0 {
			writeIteration(t, st, "runs-hack", s.commit, lengthHacking)
		}
		counting := &countingStore{Store: st, reads: map[string]int{}}
		got, err := Load(ctx, counting, "runs-hack", &LoadOptions{Cache: cache})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		var read []int
		for p := range counting.reads {
			if n, _, ok := runs.ParseIterationPath(p); ok && !slices.Contains(read, n) {
				read = append(read, n)
			}
		}
		slices.Sort(read)
		if !slices.Equal(read, s.want) {
			t.Errorf("%s: iterations read %v, want %v", s.name, read, s.want)
		}
		want, err := Load(ctx, st, "runs-hack", nil)
		if err != nil {
			t.Fatal(err)
		}
		// %+v prints NaN as NaN and maps in key order.
		if g, w := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want); g != w {
			i := 0
			for i < len(g) && i < len(w) && g[i] == w[i] {
				i++
			}
			t.Errorf("%s: with the cache Load returned another run, from byte %d:\n%.200s\nwithout it:\n%.200s", s.name, i, g[i:], w[i:])
		}
	}
}

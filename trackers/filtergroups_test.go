package trackers_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/trackers"
)

// TestFilterGroupsFigures: an iteration's filter_groups.json becomes
// filter_groups/<field> scalars (rounds counted), and one that does not
// decode fails the iteration's read naming the file.
func TestFilterGroupsFigures(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, body, want, err string
	}{
		{name: "a record", body: `{"batch_size": 4, "rounds": [{"round": 0}, {"round": 1}], "prompts_drawn": 8, "shortfall": 1, "stop": "max_num_gen_batches"}`,
			want: "batch_size=4 prompts_drawn=8 rounds=2 shortfall=1"},
		{name: "not json", body: `{"rounds": [`, err: ":iterations/000001/filter_groups.json: unexpected end of JSON input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := local.Create(ctx, filepath.Join(t.TempDir(), "store"), "main", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.PutObject(ctx, "main", runs.IterationPath(1, runs.FilterGroupsFile), strings.NewReader(tc.body), nil); err != nil {
				t.Fatal(err)
			}
			c, err := st.Commit(ctx, "main", "iteration 1", nil)
			if err != nil {
				t.Fatal(err)
			}
			points, err := trackers.Iteration(ctx, st, runs.Commit{Commit: c, Iteration: 1})
			if tc.err != "" {
				if want := "read " + c.ID + tc.err; err == nil || err.Error() != want {
					t.Fatalf("err %v, want %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for k, v := range points[0].Scalars {
				if f, ok := strings.CutPrefix(k, trackers.PrefixFilterGroups); ok {
					got = append(got, fmt.Sprintf("%s=%g", f, v))
				}
			}
			slices.Sort(got)
			if strings.Join(got, " ") != tc.want {
				t.Errorf("scalars %v, want %s", got, tc.want)
			}
		})
	}
}

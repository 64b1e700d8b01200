package pipeline

import "testing"

// A work branch is told apart from the run's other branches, and from the
// work branches of a run whose name continues this one's.
func TestWorkIteration(t *testing.T) {
	for _, tc := range []struct {
		name, branch string
		n            int
		ok           bool
	}{
		{"its own", WorkBranch("runs-arith", 11), 11, true},
		{"iteration 0", WorkBranch("runs-arith", 0), 0, true},
		{"the run branch", "runs-arith", 0, false},
		{"another run's", WorkBranch("runs-other", 11), 0, false},
		{"a run named on from it", WorkBranch("runs-arith-000001", 2), 0, false},
		{"not a number", WorkBranchPrefix + "runs-arith-00001x", 0, false},
		{"short", WorkBranchPrefix + "runs-arith-11", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, ok := workIteration("runs-arith", tc.branch)
			if n != tc.n || ok != tc.ok {
				t.Fatalf("workIteration(runs-arith, %s) = %d, %v; want %d, %v", tc.branch, n, ok, tc.n, tc.ok)
			}
		})
	}
	if got := WorkBranch("runs-arith", 11); got != "rlpipe-work-runs-arith-000011" {
		t.Fatalf("WorkBranch = %s", got)
	}
}

package harbor_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rlpipe/rlpipe/environments/harbor"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
)

// peerResult is what testdata/harborpeer/peer.py prints.
type peerResult struct {
	Tasks   map[string]map[string]map[string]float64 `json:"tasks"`
	Seconds map[string]float64                       `json:"seconds"`
}

// runPeer runs Harbor's own trials (oracle and nop agents, the bubblewrap
// BaseEnvironment of testdata/harborpeer) of tasks, repeat times each, in
// one Python process.
func runPeer(t testing.TB, repeat int, tasks ...string) peerResult {
	t.Helper()
	py := pyvenv.Harbor.Python(t, "run Harbor's own trials of the test tasks, the reference rlpipe's rewards must equal")
	args := []string{filepath.Join("testdata", "harborpeer", "peer.py"), filepath.Join(t.TempDir(), "trials"), strconv.Itoa(repeat)}
	for _, tk := range tasks {
		abs, err := filepath.Abs(tk)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, abs)
	}
	out := pyvenv.Run(t, "harborpeer/peer.py", nil, py, args...)
	var r peerResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("peer.py printed %q: %v", out, err)
	}
	return r
}

// The same tasks through Harbor's own trial (its oracle agent runs
// solution/solve.sh, its nop agent nothing; its verifier reads the reward
// files) and through rlpipe give the same reward components.
func TestParityWithHarbor(t *testing.T) {
	if os.Getenv("RLPIPE_SKIP_SANDBOX") != "" {
		t.Skip("RLPIPE_SKIP_SANDBOX is set")
	}
	names := []string{"add-numbers", "word-stats"}
	var dirs []string
	for _, n := range names {
		dirs = append(dirs, task(n))
	}
	peer := runPeer(t, 1, dirs...)
	for _, n := range names {
		abs, _ := filepath.Abs(task(n))
		tk, err := harbor.Load(task(n))
		if err != nil {
			t.Fatal(err)
		}
		for agent, script := range map[string][]string{"oracle": {tk.Solution}, "nop": nil} {
			st, err := play(t, task(n), script...)
			if err != nil {
				t.Fatalf("%s, %s: %v", n, agent, err)
			}
			ours, _ := st.Info["reward_components"].(map[string]float64)
			theirs := peer.Tasks[abs][agent]
			if len(theirs) == 0 || !maps.Equal(ours, theirs) {
				t.Errorf("%s, %s agent: rlpipe's rewards %v, Harbor's %v", n, agent, ours, theirs)
			}
		}
	}
}

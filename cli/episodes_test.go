package cli

import (
	"strings"
	"testing"
)

// An episodes stage runs in `rlpipe run`: its episodes are committed as
// trajectories rows, and the grpo trainer, which trains single-turn
// samples only, refuses them by name rather than training an episode's
// replies as one completion. (The embedded arithmetic model cannot play
// guess: its first prompt is not in its vocabulary, which the rows record.)
func TestEpisodesStageInTheLoop(t *testing.T) {
	h := newStore(t)
	h.ok("dataset", "arith", "main", "--train", "64", "--heldout", "10")
	src := smallArithConfig(t)
	old := "generate: {kind: rollout, sampling: {n: 8, temperature: 1.0, max_tokens: 5}}"
	if !strings.Contains(src, old) {
		t.Fatalf("the example no longer has %q; update this test", old)
	}
	src = strings.Replace(src, old, "generate: {kind: episodes, rl_env: guess, episodes: 2, max_turns: 3, sampling: {temperature: 1.0, max_tokens: 3}}", 1)
	cfg := h.file("episodes.yaml", src)
	r := h.run("run", "-f", cfg, "--no-report")
	if r.code == 0 || !strings.Contains(r.stderr, "is a multi-turn episode: the grpo trainer trains single-turn samples only") {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	// The iteration did not commit; its generate output is staged on the branch.
	local := h.dir + "/t.jsonl"
	h.ok("export", "runs-arith:iterations/000001/trajectories.parquet", local, "--format", "jsonl")
	lines := strings.Split(strings.TrimSpace(readFile(t, local)), "\n")
	t.Logf("first episode: %s", lines[0])
	if len(lines) != 32 || !strings.Contains(lines[0], `"turns":[{"role":"user","content":"I am thinking of a whole number`) ||
		!strings.Contains(lines[0], `"status":"env_error","error":"policy failed at turn 0: request \"arith-`) ||
		!strings.Contains(lines[0], `prompt character 'I' at column 1: not in the vocabulary`) {
		t.Errorf("%d episodes; first %s", len(lines), lines[0])
	}
}

package config_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline/config"
)

// TestEvalKAtLeastOne: eval.k: [0] is told that k starts at 1; it was
// told to sample at least k per problem, which 16 samples already do.
func TestEvalKAtLeastOne(t *testing.T) {
	src := base + "eval: {set: main:data/h.parquet, every: 1, n: 16, k: [0, 4], max_tokens: 5}\n"
	_, err := config.Parse("pipeline.yaml", []byte(src), kinds.Registry())
	const want = "pipeline.yaml:14:55: eval.k[0]: k must be at least 1, got 0 (k is the k of pass@k, at least 1 and at most eval.n, e.g. k: [1, 4, 8])"
	if err == nil || !strings.Contains(err.Error()+"\n", want+"\n") {
		t.Fatalf("error = %v\nwant a line %s", err, want)
	}
	if strings.Contains(err.Error(), "eval.k[1]") {
		t.Errorf("k: 4 with n: 16 is fine, got %v", err)
	}
}

// TestCELSpecNotFound: a reward spec that is not there is reported at
// the pipeline file's line and column of the spec key that names it,
// with where it was looked for; it was "invalid pipeline config:
// stages.reward.spec: read reward spec: open …", with no line.
func TestCELSpecNotFound(t *testing.T) {
	dir := t.TempDir()
	src := strings.Replace(base, "  reward: {kind: standin}", "  reward: {kind: cel, spec: nope.yaml}", 1)
	path := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, kinds.Registry())
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Plan(context.Background())
	want := path + ":12:23: stages.reward.spec: reward spec nope.yaml not found at " + filepath.Join(dir, "nope.yaml") +
		" (a relative path is read from the pipeline file's folder): write the spec there, or fix spec"
	if err == nil || err.Error() != want {
		t.Fatalf("plan error = %v\nwant          %s", err, want)
	}
}

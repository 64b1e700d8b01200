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

const rewardSpec = `components:
  - name: correct
    expr: 'num_equal(extract_answer(completion), answer, 1e-9) ? 1.0 : 0.0'
    weight: 1.0
`

func TestCELRewardStage(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "reward.yaml"), []byte(rewardSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "pipeline.yaml")
	p, err := loadCEL(t, path, "reward.yaml").Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Stages.Reward; r.Name != "reward" || !strings.HasPrefix(r.Version, "cel-") || r.Env != "reward" {
		t.Fatalf("reward task = %s %s env %s", r.Name, r.Version, r.Env)
	}
	// A spec with a type error fails the plan, naming the spec's line.
	if err := os.WriteFile(filepath.Join(dir, "reward.yaml"), []byte(strings.Replace(rewardSpec, "completion)", "completion + 1)", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCEL(t, path, "reward.yaml").Plan(context.Background()); err == nil || !strings.Contains(err.Error(), "stages.reward.spec") || !strings.Contains(err.Error(), "reward.yaml:3") {
		t.Fatalf("bad spec: %v", err)
	}
}

// TestCELSpecNotFound: a reward spec that is not there is reported at
// the pipeline file's line and column of the spec key that names it,
// with where it was looked for; it was "invalid pipeline config:
// stages.reward.spec: read reward spec: open …", with no line.
func TestCELSpecNotFound(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pipeline.yaml")
	_, err := loadCEL(t, path, "nope.yaml").Plan(context.Background())
	want := path + ":12:23: stages.reward.spec: reward spec nope.yaml not found at " + filepath.Join(dir, "nope.yaml") +
		" (a relative path is read from the pipeline file's folder): write the spec there, or fix spec"
	if err == nil || err.Error() != want {
		t.Fatalf("plan error = %v\nwant          %s", err, want)
	}
}

// loadCEL writes the base pipeline with a cel reward stage of spec to
// path and loads it.
func loadCEL(t *testing.T, path, spec string) *config.Config {
	t.Helper()
	src := strings.Replace(base, "  reward: {kind: standin}", "  reward: {kind: cel, spec: "+spec+"}", 1)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, kinds.Registry())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCELKindErrors(t *testing.T) {
	cases := map[string]struct{ from, to, want string }{
		"not on reward":  {"  train: {kind: standin, sleep: 1s}", "  train: {kind: cel, spec: r.yaml}", "only the reward stage can be a cel reward spec"},
		"missing spec":   {"  reward: {kind: standin}", "  reward: {kind: cel}", "a cel reward stage needs spec"},
		"spec elsewhere": {"  reward: {kind: standin}", "  reward: {kind: standin, spec: r.yaml}", "only a cel reward stage takes spec"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := config.Parse("pipeline.yaml", []byte(strings.Replace(base, c.from, c.to, 1)), kinds.Registry())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want %q", err, c.want)
			}
		})
	}
}

package main

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/examples/exampletest"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
	pipelineconfig "github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// The example end to end with the project venv's skyrl-gym: every
// episode's status and step rewards, exactly.
func TestRun(t *testing.T) {
	py := pyvenv.Py.Python(t, "run the skyrl-gym example")
	var out bytes.Buffer
	eps, err := run(context.Background(), config{Python: py, Dir: t.TempDir(), Samples: 2}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	wrong := 0.2 / 3
	want := []episode{
		{"gsm8k_multi_turn", "apples", 0, "ok", []float64{0, 1}, 1},
		{"gsm8k_multi_turn", "apples", 1, "ok", []float64{wrong, wrong, wrong}, 3 * wrong},
		{"gsm8k_multi_turn", "pages", 0, "ok", []float64{0, 1}, 1},
		{"gsm8k_multi_turn", "pages", 1, "ok", []float64{wrong, wrong, wrong}, 3 * wrong},
		{"text2sql", "pricey", 0, "ok", []float64{0, 1}, 1},
		{"text2sql", "pricey", 1, "ok", []float64{0, 1}, 1},
		{"text2sql", "cheapest", 0, "ok", []float64{0, 0}, 0},
		{"text2sql", "cheapest", 1, "ok", []float64{0, 0}, 0},
	}
	if len(eps) != len(want) {
		t.Fatalf("%d episodes, want %d", len(eps), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(eps[i], want[i]) {
			t.Errorf("episode %d: %+v\nwant %+v", i, eps[i], want[i])
		}
	}
	if !strings.Contains(out.String(), "[STAND-IN: a scripted policy, not a model]") {
		t.Error("the summary does not say the policy is a stand-in")
	}
}

// pipeline.yaml, the README's minimal YAML, is a valid pipeline of this
// program.
func TestPipelineParses(t *testing.T) {
	b, err := os.ReadFile("pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipelineconfig.Parse("pipeline.yaml", b, kinds.Registry()); err != nil {
		t.Fatal(err)
	}
}

// skyrl_gym in the loop: `rlpipe run` of two iterations whose episodes
// stage plays gsm8k through the worker, with the embedded tiny-arith as
// the policy (it answers digits, never "#### n", so every reward is 0):
// the registry, the stage and the worker wired as a user's run wires
// them, each episode ok with the env's reward in its outcome.
func TestInTheLoop(t *testing.T) {
	py := pyvenv.Py.Python(t, "run skyrl-gym in the loop")
	e := exampletest.New(t, nil)
	e.Rlpipe("init-store")
	e.Rlpipe("dataset", "arith", "main")
	cfg := `run: skyrl-loop
seed: 1
iterations: 2
batch_size: 4
dataset: main:data/arith-train.parquet
policy: {kind: embedded, model: tiny-arith}
stages:
  sample:   {kind: dataset}
  generate: {kind: episodes, rl_env: skyrl_gym, episodes: 2, max_turns: 2,
             rl_options: {env_class: gsm8k, python: ` + py + `},
             sampling: {temperature: 1.0, max_tokens: 5}}
  reward:   {kind: cel, spec: ` + exampletest.Abs(t, "reward.yaml") + `}
  train:    {kind: grpo}
`
	e.Rlpipe("run", "-f", e.Write("pipeline.yaml", cfg), "--no-report")
	rows := standintest.ReadRows(t, e.Open(), "runs-skyrl-loop", runs.IterationPath(2, runs.TrajectoriesFile), tables.Trajectories)
	if len(rows) != 8 {
		t.Fatalf("%d episodes, want 4 prompts × 2", len(rows))
	}
	for _, r := range rows {
		if r.Status != tables.StatusOK || r.EnvOutcome == nil || *r.EnvOutcome != `{"reward":0,"info":{}}` || len(r.Turns) != 2 {
			t.Errorf("%s#%d: status %s, outcome %v, %d turns; want ok, reward 0, the prompt and one reply", r.PromptID, r.SampleIndex, r.Status, deref(r.EnvOutcome), len(r.Turns))
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

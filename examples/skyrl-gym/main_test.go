package main

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
	pipelineconfig "github.com/rlpipe/rlpipe/pipeline/config"
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

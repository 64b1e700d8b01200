package kinds_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/config/configtest"
	"github.com/rlpipe/rlpipe/trainers/external"
)

// Every shipped example parses and validates. (Their plans open policies,
// which for gsm8k-vllm means a GPU cluster: only the config is checked.)
func TestExamplesValidate(t *testing.T) {
	for _, path := range []string{
		"../../examples/arithmetic/pipeline.yaml",
		"../../examples/arithmetic-vllm/pipeline.yaml",
		"../../examples/arithmetic-torch/pipeline.yaml",
		"../../examples/chain/pipeline.yaml",
		"../../examples/agent-sandbox/pipeline.yaml",
		"../../examples/gsm8k-vllm/pipeline.yaml",
		"../../examples/standin/pipeline.yaml",
		"../../examples/openenv/pipeline.yaml",
	} {
		t.Run(path, func(t *testing.T) {
			c, err := config.Load(path, kinds.Registry())
			if err != nil {
				t.Fatal(err)
			}
			if c.Stages.Train == nil || c.Stages.Generate == nil {
				t.Fatalf("%s: stages missing", path)
			}
		})
	}
}

// The gsm8k-vllm example's plan builds — the external trainer, the
// OpenAI client — without reaching its servers.
func TestGSM8KVLLMPlan(t *testing.T) {
	t.Setenv("VLLM_API_KEY", "test-key")
	c, err := config.Load("../../examples/gsm8k-vllm/pipeline.yaml", kinds.Registry())
	if err != nil {
		t.Fatal(err)
	}
	p := configtest.MustPlan(t, c)
	eval := p.Stages.Step("eval")
	if p.Stages.Train.Name != "train" || p.Stages.Generate.Name != "generate" || eval == nil || eval.When(9, 20) || !eval.When(10, 20) {
		t.Errorf("plan: train %q generate %q eval step %+v, want one every 10 iterations", p.Stages.Train.Name, p.Stages.Generate.Name, eval)
	}
	if p.Policy.Identity != "Qwen/Qwen2.5-1.5B-Instruct" {
		t.Errorf("identity %q", p.Policy.Identity)
	}
	// Without the key the plan says which variable to export.
	t.Setenv("VLLM_API_KEY", "")
	if _, err := c.Plan(context.Background()); err == nil {
		t.Error("a missing API key was accepted")
	}
}

// The external trainers' hyperparameters in the examples pass the
// reference trainer's own checks (its argument parsing needs no torch).
func TestExampleHyperparametersFitTheReferenceTrainer(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	for _, path := range []string{"../../examples/gsm8k-vllm/pipeline.yaml", "../../examples/arithmetic-torch/pipeline.yaml"} {
		t.Run(path, func(t *testing.T) {
			c, err := config.Load(path, kinds.Registry())
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(c.Stages.Train.Options.(*external.Stage).Hyperparameters)
			if err != nil {
				t.Fatal(err)
			}
			hp := filepath.Join(t.TempDir(), "hparams.json")
			if err := os.WriteFile(hp, b, 0o644); err != nil {
				t.Fatal(err)
			}
			script, _ := filepath.Abs("../../trainers/python")
			cmd := exec.Command(py, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import grpo_train; grpo_train.load_hparams(sys.argv[2])", script, hp)
			cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("the reference trainer rejects the example's hyperparameters: %v\n%s", err, out)
			}
		})
	}
}

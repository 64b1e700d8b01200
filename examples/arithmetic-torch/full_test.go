package arithmetictorch

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/examples/exampletest"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy/openai"
)

// fullIterations is how far the full fine-tuning variant runs.
const fullIterations = 3

// pipeline.yaml's full fine-tuning variant (hyperparameters lora: none;
// one python process, not torchrun): every iteration commits a whole
// Hugging Face model directory with its AdamW state, and vLLM reloads
// it in place (VLLM_SERVER_DEV_MODE=1, as vllmserver starts it) to
// sample the iteration after next, the rows naming the weights; the
// held-out evaluation of the base model and of the last weights, on
// the same server, takes turns with the generate tasks; and held-out
// pass@1 rises. Skipped without the venv.
func TestFullWeightsWithVLLM(t *testing.T) {
	py := exampletest.VLLMPython(t, "starts vLLM and fine-tunes every weight for 3 iterations")
	t.Setenv("PATH", filepath.Dir(py)+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // rlpipe's copies of the weights vLLM reloads
	model, srv := server(t, py)
	t.Cleanup(func() { // the next test gets the export's weights back
		c, err := openai.New(&openai.Options{Endpoints: []string{srv.URL()}, Model: srv.Name()})
		if err == nil {
			err = c.LoadWeights(context.Background(), "weights-export", model)
		}
		if err != nil {
			t.Errorf("reload the export into the shared server: %v", err)
		}
	})
	base, last, s := runExample(t, srv, model, "arith-full", fullIterations, map[string]string{
		`[torchrun, --standalone, --nproc_per_node, "2", ../../trainers/python/grpo_train.py]`:                 "[python, " + exampletest.Abs(t, "../../trainers/python/grpo_train.py") + "]",
		"lora: {rank: 8, alpha: 16, targets: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]}": "lora: none",
		"lr: 2.0e-3": "lr: 5.0e-4",
	})
	// Measured: 0.3119 → 0.5687 (+25.69 points) in 3 iterations.
	if last <= base+0.02 {
		t.Errorf("held-out pass@1 went from %.4f to %.4f: training should raise it by more than 2 points", base, last)
	}
	const branch = "runs-arith-full"
	versions := map[string]bool{}
	for it := 1; it <= fullIterations; it++ {
		var m struct {
			OptimizerSteps int `json:"optimizer_steps"`
			Updates        int `json:"updates"`
		}
		if err := json.Unmarshal(standintest.Read(t, s, branch, runs.IterationPath(it, runs.TrainMetricsFile)), &m); err != nil {
			t.Fatal(err)
		}
		if m.OptimizerSteps != it || m.Updates != it {
			t.Errorf("iteration %d: %d optimizer steps, %d updates: want %d, continuing the previous iteration's state", it, m.OptimizerSteps, m.Updates, it)
		}
		for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "optimizer/optimizer.pt"} {
			standintest.Read(t, s, branch, runs.IterationPath(it, runs.AdapterDir+"/"+f))
		}
		exampletest.SampledFromNew(t, s, branch, it, "tiny-arith+weights-", versions)
	}
}

// Package arithmetictorch holds the test of the arithmetic pipeline in the
// production topology on the CPU — vLLM sampling, the reference PyTorch
// trainer under torchrun — see pipeline.yaml and README.md.
package arithmetictorch

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/examples/exampletest"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy/embedded"
	"github.com/rlpipe/rlpipe/policy/vllmserver"
)

// iterations is how far the test runs pipeline.yaml: each iteration's
// train call starts two torch processes (about 15 s on two busy cores).
const iterations = 6

// pipeline.yaml as shipped, cut to a few iterations, through `rlpipe run`:
// vLLM serving the exported tiny-arith on a free loopback port samples
// every iteration from the previous adapter, hot-loaded, and
// grpo_train.py under torchrun (two gloo ranks) trains on vLLM's token ids
// and logprobs. Every iteration commits a PEFT adapter with its optimizer
// state, and held-out pass@1 rises. Skipped without the venv
// (scripts/py-venv.sh).
func TestPipelineWithTorchrunAndVLLM(t *testing.T) {
	py := exampletest.VLLMPython(t, "starts vLLM and runs torchrun for each of 6 iterations")
	bin := filepath.Dir(py)
	if _, err := os.Stat(filepath.Join(bin, "torchrun")); err != nil {
		t.Skipf("the venv of %s has no torchrun: run scripts/py-venv.sh", py)
	}
	// pipeline.yaml's command is `torchrun …`, found on the PATH as run.sh
	// puts the venv there.
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	model, srv := server(t, py)
	base, last, s := runExample(t, srv, model, "arith-torch", iterations, map[string]string{
		"../../trainers/python/grpo_train.py": exampletest.Abs(t, "../../trainers/python/grpo_train.py"),
	})
	// 200 problems × 8 samples: a standard error of about 1.1 points.
	if last <= base+0.02 {
		t.Errorf("held-out pass@1 went from %.4f to %.4f: training should raise it by more than 2 points", base, last)
	}

	// Every iteration committed what torchrun's rank 0 wrote — a PEFT
	// adapter with AdamW's state, one more step each — and, with overlap
	// (max_staleness 1), iteration N sampled from iteration N-2's adapter
	// hot-loaded into vLLM: the first two from the base.
	const branch = "runs-arith-torch"
	versions := map[string]bool{}
	for it := 1; it <= iterations; it++ {
		var m struct {
			OptimizerSteps int      `json:"optimizer_steps"`
			Updates        int      `json:"updates"`
			Loss           *float64 `json:"loss"`
			TrainTokens    int      `json:"train_tokens"`
			Reward         struct {
				Mean float64 `json:"mean"`
			} `json:"reward"`
		}
		if err := json.Unmarshal(standintest.Read(t, s, branch, runs.IterationPath(it, runs.TrainMetricsFile)), &m); err != nil {
			t.Fatal(err)
		}
		t.Logf("iteration %d: reward %.3f, loss %v, %d tokens, optimizer step %d", it, m.Reward.Mean, fmtPtr(m.Loss), m.TrainTokens, m.OptimizerSteps)
		if m.OptimizerSteps != it || m.Updates != it {
			t.Errorf("iteration %d: %d optimizer steps, %d updates: want %d, continuing from the previous iteration's state", it, m.OptimizerSteps, m.Updates, it)
		}
		for _, f := range []string{runs.AdapterConfigFile, "adapter_model.safetensors", "optimizer/optimizer.pt"} {
			standintest.Read(t, s, branch, runs.IterationPath(it, runs.AdapterDir+"/"+f))
		}
		exampletest.SampledFromNewAdapters(t, s, branch, it, "tiny-arith", versions)
	}
}

// runExample runs pipeline.yaml through `rlpipe run` as run, for
// iterations, against srv serving model, with edits on top of those
// every run needs (the server's URL, absolute paths, 8 samples per
// held-out problem, the evaluation of the last iteration), and checks
// that it evaluated the base model and the last iteration: it returns
// their held-out pass@1 and the store.
func runExample(t *testing.T, srv *vllmserver.Server, model, run string, iterations int, edits map[string]string) (base, last float64, s artifacts.Store) {
	t.Helper()
	all := map[string]string{
		"run: arith-torch":                "run: " + run,
		"http://127.0.0.1:8012":           srv.URL(),
		"spec: ../arithmetic/reward.yaml": "spec: " + exampletest.Abs(t, "../arithmetic/reward.yaml"),
		"base_model: tiny-arith ":         "base_model: " + model + " ",
		"iterations: 8":                   fmt.Sprintf("iterations: %d", iterations),
		"every: 4":                        fmt.Sprintf("every: %d", iterations),
		"n: 16":                           "n: 8",
		"k: [1, 4, 16]":                   "k: [1, 8]",
	}
	maps.Copy(all, edits)
	e := exampletest.New(t, srv.LogTail)
	e.Rlpipe("init-store")
	e.Rlpipe("dataset", "arith", "main", "--train", "1024", "--heldout", "200")
	cfg := e.Write("pipeline.yaml", exampletest.Config(t, "pipeline.yaml", all))
	start := time.Now()
	e.Rlpipe("run", "-f", cfg, "--no-report")
	elapsed := time.Since(start)

	evals := e.Evals(run)
	if len(evals) != 2 || evals[0].Checkpoint != "base" || evals[1].Iteration != iterations {
		t.Fatalf("evals %+v: want the base model, then iteration %d", evals, iterations)
	}
	base, last = evals[0].Metrics["pass@1"], evals[1].Metrics["pass@1"]
	t.Logf("%s: %d iterations in %s; held-out pass@1 sampled by vLLM: base %.4f, iteration %d %.4f (%+.2f points); pass@8 %.4f → %.4f",
		run, iterations, elapsed.Round(time.Second), base, iterations, last, 100*(last-base), evals[0].Metrics["pass@8"], evals[1].Metrics["pass@8"])
	for _, v := range []float64{base, last} {
		if math.IsNaN(v) || v < 0 || v > 1 {
			t.Errorf("pass@1 %v is not a rate", v)
		}
	}
	return base, last, e.Open()
}

// shared is the vLLM server the package's tests share (starting one takes
// most of a minute): the exported tiny-arith, served as tiny-arith.
var shared struct {
	once  sync.Once
	dir   string
	model string
	srv   *vllmserver.Server
	err   error
}

// server starts the shared server on first use; TestMain stops it.
func server(t *testing.T, py string) (model string, srv *vllmserver.Server) {
	t.Helper()
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "rlpipe-arith-torch-"); shared.err != nil {
			return
		}
		m, err := embedded.Load("tiny-arith")
		if err != nil {
			shared.err = err
			return
		}
		shared.model = filepath.Join(shared.dir, "tiny-arith")
		if shared.err = m.ExportHF(shared.model); shared.err != nil {
			return
		}
		shared.srv, shared.err = vllmserver.Start(context.Background(), &vllmserver.Options{Python: py, Model: shared.model, Name: "tiny-arith"})
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.model, shared.srv
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		_ = shared.srv.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func fmtPtr(p *float64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprintf("%.6g", *p)
}

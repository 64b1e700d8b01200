package external_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/external/torchtest"
)

// torchPython is the project venv's python with torch, transformers and
// peft (torchtest.Python); the test is skipped, saying so, without one.
func torchPython(t *testing.T) string { return torchtest.Python(t) }

// slowTorchPython is torchPython for a test that takes long: with -short
// it skips the test, saying what it would run.
func slowTorchPython(t *testing.T, runs string) string {
	t.Helper()
	if testing.Short() {
		t.Skip(runs)
	}
	return torchPython(t)
}

// tinyLlamaIDs tokenizes s as scripts/py-smoke/tiny_llama.py's character
// tokenizer does: <pad> <bos> <eos> <unk>, then one id per character.
func tinyLlamaIDs(s string) []int32 {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789 +=\n"
	ids := make([]int32, len(s))
	for i := range s {
		ids[i] = int32(4 + strings.IndexByte(chars, s[i]))
	}
	return ids
}

// The reference script, run for real with torch on a tiny random Llama,
// trains one-turn episodes exactly as the single-turn samples of the same
// tokens (the same loss and the same adapter bytes), and trains two-turn
// episodes on their replies' tokens only.
func TestReferenceScriptEpisodesWithTorch(t *testing.T) {
	py := torchPython(t)
	dir := t.TempDir()
	cmd := exec.Command(py, filepath.Join("..", "..", "scripts", "py-smoke", "tiny_llama.py"), dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tiny_llama.py: %v\n%s", err, out)
	}
	const eos = 2
	prompts := []tables.Prompt{{PromptID: "p0", Prompt: "12+3="}, {PromptID: "p1", Prompt: "7+8="}, {PromptID: "p2", Prompt: "40+2="}}
	replies := [][]string{{"15", "16"}, {"15", "17"}, {"42", "43"}}
	var single, oneTurn, twoTurns []tables.Trajectory
	var adv []tables.Advantage
	replyTokens := 0
	for i, p := range prompts {
		pids := tinyLlamaIDs(p.Prompt)
		for j, r := range replies[i] {
			rid := append(tinyLlamaIDs(r), eos)
			lps := make([]float32, len(rid))
			for k := range lps {
				lps[k] = -0.5 - 0.1*float32(k)
			}
			base := tables.Trajectory{PromptID: p.PromptID, SampleIndex: int32(j), GroupID: p.PromptID, Completion: r, Status: tables.StatusOK,
				FinishReason: "stop", TokenIDs: rid, Logprobs: lps, NumTokens: int32(len(rid))}
			single = append(single, base)
			ep := base
			ep.Turns = []tables.Turn{{Role: "user", Content: p.Prompt}, {Role: "assistant", Content: r}}
			ep.Sequence = append(append([]int32(nil), pids...), rid...)
			ep.Trainable = append(make([]int32, len(pids)), ones(len(rid))...)
			oneTurn = append(oneTurn, ep)
			obs, rid2 := tinyLlamaIDs("+1="), append(tinyLlamaIDs(r+"1"), eos)
			two := ep
			two.Turns = append(append([]tables.Turn(nil), ep.Turns...), tables.Turn{Role: "user", Content: "+1="}, tables.Turn{Role: "assistant", Content: r + "1"})
			two.TokenIDs = append(append([]int32(nil), rid...), rid2...)
			two.Logprobs = append(append([]float32(nil), lps...), make([]float32, len(rid2))...)
			two.Sequence = append(append(append([]int32(nil), ep.Sequence...), obs...), rid2...)
			two.Trainable = append(append(append([]int32(nil), ep.Trainable...), make([]int32, len(obs))...), ones(len(rid2))...)
			twoTurns = append(twoTurns, two)
			replyTokens += len(rid) + len(rid2)
			a := 1.0
			if j == 1 {
				a = -1
			}
			adv = append(adv, tables.Advantage{PromptID: p.PromptID, SampleIndex: int32(j), Advantage: a, GroupSize: 2})
		}
	}
	write := func(name string, fn func(path string) error) string {
		path := filepath.Join(dir, name)
		if err := fn(path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	promptsFile := write("prompts.parquet", func(p string) error { return tables.WriteFile(p, tables.Prompts, prompts, nil) })
	advFile := write("advantages.parquet", func(p string) error { return tables.WriteFile(p, tables.Advantages, adv, nil) })
	hp := write("hparams.json", func(p string) error {
		return os.WriteFile(p, []byte(`{"base_model": "`+filepath.Join(dir, "model")+`", "dtype": "float32", "lr": 0.01, "lora": {"rank": 4, "alpha": 8}}`), 0o644)
	})
	type result struct {
		Loss        float64 `json:"loss"`
		TrainTokens int     `json:"train_tokens"`
		adapter     []byte
	}
	train := func(name string, rows []tables.Trajectory) result {
		trajs := write(name+".parquet", func(p string) error { return tables.WriteFile(p, tables.Trajectories, rows, nil) })
		out := filepath.Join(dir, name)
		cmd := exec.Command(py, script, "--trajectories", trajs, "--advantages", advFile, "--prompts", promptsFile, "--hparams", hp,
			"--adapter-out", filepath.Join(out, "adapter"), "--optimizer-out", filepath.Join(out, "optimizer"), "--metrics-out", filepath.Join(out, "metrics.json"), "--seed", "3")
		cmd.Env = append(os.Environ(), "PYTHONPYCACHEPREFIX="+t.TempDir())
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, b)
		}
		var r result
		b, err := os.ReadFile(filepath.Join(out, "metrics.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		if r.adapter, err = os.ReadFile(filepath.Join(out, "adapter", "adapter_model.safetensors")); err != nil {
			t.Fatal(err)
		}
		return r
	}
	s, e1, e2 := train("single", single), train("one-turn", oneTurn), train("two-turns", twoTurns)
	t.Logf("loss: samples %.12f, one-turn episodes %.12f, two-turn episodes %.12f (%d tokens)", s.Loss, e1.Loss, e2.Loss, e2.TrainTokens)
	if s.Loss != e1.Loss || s.TrainTokens != e1.TrainTokens || !bytes.Equal(s.adapter, e1.adapter) {
		t.Errorf("one-turn episodes: loss %v on %d tokens, want the samples' %v on %d, and the same adapter bytes (%v)",
			e1.Loss, e1.TrainTokens, s.Loss, s.TrainTokens, bytes.Equal(s.adapter, e1.adapter))
	}
	if e2.TrainTokens != replyTokens {
		t.Errorf("two-turn episodes trained on %d tokens, want their %d reply tokens (no observation's)", e2.TrainTokens, replyTokens)
	}
}

func ones(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

// An episode's sequence with or without the BOS the exported tokenizer
// puts first (a vLLM episode has it, an embedded-policy episode leaves it
// to the engine) trains exactly as the single-turn samples of the same
// tokens: the script adds the tokenizer's BOS where it is missing.
func TestReferenceScriptEpisodesWithAndWithoutBOS(t *testing.T) {
	py := torchPython(t)
	m, model := torchtest.Export(t)
	dir := t.TempDir()
	f := torchtest.Batch(t, m, dir, 5, 4, 4, 0)
	hp := torchtest.Hparams(model)

	prompts := map[string]string{}
	for _, p := range f.Batch.Prompts {
		prompts[p.PromptID] = p.Prompt
	}
	// The samples, then the episodes without and with the BOS: three
	// calls of the script in one python process (torchtest.Many).
	specs := []torchtest.Spec{{Files: f, Hparams: hp, Iteration: 1}}
	bos := []bool{false, true}
	for _, withBOS := range bos {
		var rows []tables.Trajectory
		for _, r := range f.Batch.Trajectories {
			ids, err := m.Tokenize(prompts[r.PromptID])
			if err != nil {
				t.Fatal(err)
			}
			if withBOS {
				ids = append([]int32{tiny.BOS}, ids...)
			}
			r.Turns = []tables.Turn{{Role: "user", Content: prompts[r.PromptID]}, {Role: "assistant", Content: r.Completion}}
			r.Sequence = append(append([]int32(nil), ids...), r.TokenIDs...)
			r.Trainable = append(make([]int32, len(ids)), ones(len(r.TokenIDs))...)
			rows = append(rows, r)
		}
		ep := f
		ep.Trajectories = filepath.Join(t.TempDir(), "episodes.parquet")
		if err := tables.WriteFile(ep.Trajectories, tables.Trajectories, rows, nil); err != nil {
			t.Fatal(err)
		}
		specs = append(specs, torchtest.Spec{Files: ep, Hparams: hp, Iteration: 1})
	}
	rs := torchtest.Many(t, py, specs)
	single := rs[0]
	for i, withBOS := range bos {
		got := rs[i+1]
		a, b := readBytes(t, filepath.Join(single.Adapter, "adapter_model.safetensors")), readBytes(t, filepath.Join(got.Adapter, "adapter_model.safetensors"))
		if got.Metrics.Loss != single.Metrics.Loss || got.Metrics.TrainTokens != single.Metrics.TrainTokens || !bytes.Equal(a, b) {
			t.Errorf("episodes (BOS in the sequence: %v): loss %v on %d tokens, want the samples' %v on %d and the same adapter bytes (%v)",
				withBOS, got.Metrics.Loss, got.Metrics.TrainTokens, single.Metrics.Loss, single.Metrics.TrainTokens, bytes.Equal(a, b))
		}
	}
}

func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

package tiny

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/policy"
)

// torchPython is the project venv's python with torch, transformers and
// peft (internal/pyvenv); the test is skipped, saying so, without one.
func torchPython(t *testing.T) string {
	return pyvenv.Python(t, "check the model against transformers")
}

func TestExportHFRoundTrip(t *testing.T) {
	for _, load := range []func() (*Model, error){Embedded, EmbeddedChain, EmbeddedRG} {
		m, err := load()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := m.ExportHF(dir); err != nil {
			t.Fatal(err)
		}
		back, err := LoadHF(dir)
		if err != nil {
			t.Fatal(err)
		}
		if back.Config() != m.Config() || back.Version() != m.Version() {
			t.Errorf("exported %s came back as %+v, %s", m.Version(), back.Config(), back.Version())
		}
		// Exporting twice gives the same bytes.
		again := t.TempDir()
		if err := back.ExportHF(again); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{HFConfigFile, HFGenerationFile, HFWeightsFile, HFTokenizerFile, HFTokenizerConfigFile} {
			a, _ := os.ReadFile(filepath.Join(dir, f))
			b, err := os.ReadFile(filepath.Join(again, f))
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("%s differs between two exports (%v)", f, err)
			}
		}
	}
}

// TestLoadHFRefuses: every field the engine cannot honour is named.
func TestLoadHFRefuses(t *testing.T) {
	m := testModel(t)
	base := t.TempDir()
	if err := m.ExportHF(base); err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(filepath.Join(base, HFConfigFile))
	for _, c := range []struct {
		field string
		value any
	}{
		{"architectures", []string{"MistralForCausalLM"}},
		{"hidden_act", "gelu"},
		{"attention_bias", true},
		{"mlp_bias", true},
		{"tie_word_embeddings", true},
		{"num_key_value_heads", 1},
		{"rope_scaling", map[string]any{"rope_type": "linear", "factor": 2}},
		{"rms_norm_eps", 1e-6},
		{"vocab_size", 32000},
	} {
		dir := t.TempDir()
		for _, f := range []string{HFWeightsFile, HFTokenizerFile} {
			b, _ := os.ReadFile(filepath.Join(base, f))
			os.WriteFile(filepath.Join(dir, f), b, 0o644)
		}
		var doc map[string]any
		json.Unmarshal(cfg, &doc)
		doc[c.field] = c.value
		b, _ := json.Marshal(doc)
		os.WriteFile(filepath.Join(dir, HFConfigFile), b, 0o644)
		_, err := LoadHF(dir)
		if !errors.Is(err, ErrArchitecture) || !strings.Contains(err.Error(), `field "`+c.field+`"`) ||
			!strings.Contains(err.Error(), filepath.Join(dir, HFConfigFile)) {
			t.Errorf("%s = %v: %v", c.field, c.value, err)
		}
	}
	// A BPE tokenizer is not a character vocabulary.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, HFConfigFile), cfg, 0o644)
	os.WriteFile(filepath.Join(dir, HFTokenizerFile), []byte(`{"model": {"type": "BPE", "vocab": {}}}`), 0o644)
	if _, err := LoadHF(dir); !errors.Is(err, ErrArchitecture) || !strings.Contains(err.Error(), `"model.type" is "BPE"`) {
		t.Errorf("BPE tokenizer: %v", err)
	}
}

// TestTransformersParity runs the exported model and a trained adapter in
// transformers (float32) and PEFT: per-token log-probabilities agree with
// the Go engine's within 1e-4, and the tokenizer and chat template give
// the engine's token ids.
func TestTransformersParity(t *testing.T) {
	py := torchPython(t)
	ctx := context.Background()
	m, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	// An adapter with every factor non-zero, saved as PEFT's.
	a, err := m.NewAdapter(LoRAConfig{Name: "parity", Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	for i := range a.flat {
		a.flat[i] = float32(0.05 * rng.NormFloat64())
	}
	a.changed()
	dir := t.TempDir()
	model, adapter := filepath.Join(dir, "model"), filepath.Join(dir, "adapter")
	if err := m.ExportHF(model); err != nil {
		t.Fatal(err)
	}
	if err := a.Save(adapter); err != nil {
		t.Fatal(err)
	}

	texts := []string{"12+3=15", "907+88=995", "5+5=10"}
	var seqs [][]int32
	var batch []Example
	for _, p := range HeldOutProblems(6) {
		e, err := m.Example(p)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, append(append([]int32{BOS}, e.Prompt...), e.Completion...))
		batch = append(batch, Example{Completion: seqs[len(seqs)-1][1:]})
	}
	chain, err := m.ChainExample(HeldOutProblems(1)[0], 7)
	if err != nil {
		t.Fatal(err)
	}
	seqs = append(seqs, append(append([]int32{BOS}, chain.Prompt...), chain.Completion...))
	batch = append(batch, Example{Completion: seqs[len(seqs)-1][1:]})
	chat := []policy.Message{{Role: "user", Content: "12+3="}, {Role: "assistant", Content: "15"}, {Role: "user", Content: "15+4="}}

	run := func(args ...string) (lps [][]float64, encoded [][]int32, chatIDs []int32) {
		in, _ := json.Marshal(map[string]any{"sequences": seqs, "texts": texts, "chat": chat})
		out := pyvenv.Run(t, "hf_logprobs.py", in, py, append([]string{filepath.Join("testdata", "hf_logprobs.py"), model}, args...)...)
		var res struct {
			Logprobs [][]float64
			Encoded  [][]int32
			Chat     []int32
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("hf_logprobs.py printed %q: %v", out, err)
		}
		return res.Logprobs, res.Encoded, res.Chat
	}
	for _, c := range []struct {
		name string
		a    *Adapter
		args []string
	}{{"base", nil, nil}, {"lora", a, []string{"--adapter", adapter}}} {
		want, _, err := m.Score(ctx, c.a, batch)
		if err != nil {
			t.Fatal(err)
		}
		got, encoded, chatIDs := run(c.args...)
		worst := 0.0
		for i := range want {
			if len(got[i]) != len(want[i]) {
				t.Fatalf("%s: sequence %d: transformers gave %d log-probabilities, Go %d", c.name, i, len(got[i]), len(want[i]))
			}
			for j := range want[i] {
				worst = math.Max(worst, math.Abs(got[i][j]-float64(want[i][j])))
			}
		}
		t.Logf("%s: largest |Go − transformers| per-token log-probability: %.3g", c.name, worst)
		if worst > 1e-4 {
			t.Errorf("%s: log-probabilities differ by up to %.3g", c.name, worst)
		}
		if c.a != nil {
			continue
		}
		for i, s := range texts {
			ids, _ := m.Tokenize(s)
			if want := append([]int32{BOS}, ids...); !slices.Equal(encoded[i], want) {
				t.Errorf("AutoTokenizer encodes %q as %v, the engine as %v", s, encoded[i], want)
			}
		}
		ids, _ := m.PromptTokens(policy.Request{Messages: chat})
		if want := append([]int32{BOS}, ids...); !slices.Equal(chatIDs, want) {
			t.Errorf("the chat template gives %v, the engine %v", chatIDs, want)
		}
	}
}

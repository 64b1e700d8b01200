package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/embedded"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

func TestPolicyServeRefusesPublicAddressWithoutToken(t *testing.T) {
	h := newHarness(t)
	r := h.runRaw("policy", "serve", "--addr", "0.0.0.0:0")
	if r.code != 1 || !strings.Contains(r.stderr, "needs a token") || !strings.Contains(r.stderr, policyTokenEnv) {
		t.Fatalf("exit %d, stderr %q: want a refusal naming %s", r.code, r.stderr, policyTokenEnv)
	}
}

func TestPolicyServeUnknownModel(t *testing.T) {
	h := newHarness(t)
	r := h.runRaw("policy", "serve", "--model", "/nonexistent/w.safetensors")
	if r.code != 1 || !strings.Contains(r.stderr, "/nonexistent/w.safetensors") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestPolicyServe serves the embedded model on loopback and lists it.
func TestPolicyServe(t *testing.T) {
	// "serving VERSION on http://ADDR (...)"
	url, stop := serving(t, 3, func(ctx context.Context, p printer) error {
		return policyServe(ctx, policyServeOptions{addr: "127.0.0.1:0", model: "tiny-arith"}, "", zerolog.Nop(), p)
	})
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if err != nil || len(models.Data) != 1 || !strings.HasPrefix(models.Data[0].ID, "tiny-arith@") {
		t.Fatalf("models %+v, %v", models, err)
	}
	stop()
}

// savedAdapter is the shipped model and a fresh adapter of it (LoRA seed
// 1), saved in a temporary directory named name.
func savedAdapter(t *testing.T, name string) (*tiny.Model, string) {
	t.Helper()
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.NewAdapter(tiny.LoRAConfig{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), name)
	if err := a.Save(dir); err != nil {
		t.Fatal(err)
	}
	return m, dir
}

// policyExportOut is what `policy export -o json` prints.
type policyExportOut struct {
	Dir, Version, Architecture, Adapter string
	Parameters                          int
	Weights                             bool
}

// commitCheckpoint commits the files of the local directory dir on a new
// branch runs-x at iterations/000001/adapter/, where a run commits its
// first checkpoint, with message, and returns them.
func (h *harness) commitCheckpoint(dir, message string) []os.DirEntry {
	h.t.Helper()
	files, err := os.ReadDir(dir)
	if err != nil {
		h.t.Fatal(err)
	}
	h.ok("branch", "create", "runs-x", "--from", "main")
	for _, f := range files {
		h.ok("put", filepath.Join(dir, f.Name()), "runs-x:iterations/000001/adapter/"+f.Name())
	}
	h.ok("commit", "runs-x", "-m", message)
	return files
}

// TestPolicyExport writes the shipped model as a Hugging Face directory
// with a run's kind of adapter, serves it back from the directory, and
// refuses an adapter of another shape by name.
func TestPolicyExport(t *testing.T) {
	h := newHarness(t)
	dir := filepath.Join(t.TempDir(), "hf")
	m, adapter := savedAdapter(t, "step-000001")
	var res policyExportOut
	h.json(&res, "policy", "export", dir, "--adapter", adapter)
	if res.Version != m.Version() || res.Architecture != "LlamaForCausalLM" || res.Parameters != m.NumParams() || res.Adapter != filepath.Join(dir, "adapter") {
		t.Errorf("export said %+v", res)
	}
	for _, f := range []string{tiny.HFConfigFile, tiny.HFWeightsFile, tiny.HFTokenizerFile, tiny.HFTokenizerConfigFile, tiny.HFGenerationFile, "adapter/adapter_config.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	// The directory is a model the embedded policy runs, the same model.
	back, err := embedded.Load(dir)
	if err != nil || back.Version() != m.Version() {
		t.Fatalf("loaded back %v, %v", back, err)
	}
	wide := tiny.DefaultConfig()
	wide.Hidden = 200
	other, _ := tiny.New(wide, 1)
	oa, _ := other.NewAdapter(tiny.LoRAConfig{Targets: []string{"up_proj"}})
	bad := filepath.Join(t.TempDir(), "wide")
	oa.Save(bad)
	h.fails(1, []string{`up_proj.lora_B.weight" has shape [200 8]`}, "policy", "export", t.TempDir(), "--adapter", bad)
}

// TestPolicyExportAdapterFromStore: --adapter REF:PATH takes the adapter
// a run commits in the store (iterations/NNNNNN/adapter), the same bytes
// as the local directory it was made from; a path with nothing under it
// names the path and the command that lists the run's iterations.
func TestPolicyExportAdapterFromStore(t *testing.T) {
	h := newStore(t)
	_, local := savedAdapter(t, "adapter")
	files := h.commitCheckpoint(local, "an adapter")

	dir := filepath.Join(t.TempDir(), "hf")
	var res policyExportOut
	h.json(&res, "policy", "export", dir, "--adapter", "runs-x:iterations/000001/adapter")
	if res.Adapter != filepath.Join(dir, "adapter") {
		t.Fatalf("export said %+v", res)
	}
	for _, f := range files {
		if got, want := readFile(t, filepath.Join(dir, "adapter", f.Name())), readFile(t, filepath.Join(local, f.Name())); got != want {
			t.Errorf("adapter/%s differs from the adapter put in the store", f.Name())
		}
	}
	h.fails(ExitFailure, []string{"rlpipe: policy export --adapter runs-x:iterations/000009/adapter: object not found: no directory iterations/000009/adapter at runs-x and none on this machine (`rlpipe ls runs-x:iterations/` lists a run's iterations)\n"},
		"policy", "export", t.TempDir(), "--adapter", "runs-x:iterations/000009/adapter")
}

// TestPolicyExportFullWeights: --adapter REF:PATH takes the full weights a
// trainer with lora: none commits: DIR becomes that model, resharded at
// --max-shard-size and checked; a checkpoint whose shards do not match
// its index is refused naming the shard.
func TestPolicyExportFullWeights(t *testing.T) {
	h := newStore(t)
	trained, err := tiny.New(tiny.DefaultConfig(), 3) // the shape of tiny-arith, other weights
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(t.TempDir(), "full")
	if err := trained.ExportHFSharded(local, 300<<10); err != nil {
		t.Fatal(err)
	}
	h.commitCheckpoint(local, "full weights")

	dir := filepath.Join(t.TempDir(), "hf")
	var res policyExportOut
	h.json(&res, "policy", "export", dir, "--adapter", "runs-x:iterations/000001/adapter", "--max-shard-size", "500000")
	back, err := embedded.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Weights || res.Adapter != "" || res.Version != back.Version() {
		t.Fatalf("export said %+v; the directory loads as %s", res, back.Version())
	}
	if err := policy.CheckShards(dir); err != nil {
		t.Fatal(err)
	}
	wantFiles := []string{"config.json", "generation_config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
		"model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"}
	es, _ := os.ReadDir(dir)
	var got []string
	for _, e := range es {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, wantFiles) {
		t.Fatalf("files %q, want %q", got, wantFiles)
	}

	if err := os.Remove(filepath.Join(local, "model-00002-of-00003.safetensors")); err != nil {
		t.Fatal(err)
	}
	h.fails(ExitFailure, []string{"rlpipe: policy export: check the shards of " + local + ": shard model-00002-of-00003.safetensors, named by model.safetensors.index.json, is missing: not a policy checkpoint: shards do not match their index (the directory is incomplete or mixes two checkpoints; write it again)\n"},
		"policy", "export", t.TempDir(), "--adapter", local)
}

package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

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

// TestPolicyExport writes the shipped model as a Hugging Face directory
// with a run's kind of adapter, serves it back from the directory, and
// refuses an adapter of another shape by name.
func TestPolicyExport(t *testing.T) {
	h := newHarness(t)
	dir := filepath.Join(t.TempDir(), "hf")
	adapter := filepath.Join(t.TempDir(), "step-000001")
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.NewAdapter(tiny.LoRAConfig{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Save(adapter); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Dir, Version, Architecture, Adapter string
		Parameters                          int
	}
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

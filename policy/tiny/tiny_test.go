package tiny

import (
	"bytes"
	"context"
	"errors"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/safetensors"
)

// testModel is an untrained default-size model: its samples are random
// strings, which is what the mechanics tests want.
func testModel(t testing.TB) *Model {
	t.Helper()
	m, err := New(DefaultConfig(), 7)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTokenize(t *testing.T) {
	m := testModel(t)
	ids, err := m.Tokenize("12+3=")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Decode(append(ids, EOS)); got != "12+3=" {
		t.Errorf("round trip gave %q", got)
	}
	_, err = m.Tokenize("12+x=")
	if !errors.Is(err, ErrVocabulary) || !strings.Contains(err.Error(), `character 'x' at column 4`) {
		t.Errorf("unknown character: %v", err)
	}
	_, err = m.Tokenize("1é")
	if err == nil || !strings.Contains(err.Error(), "column 2") {
		t.Errorf("non-ASCII: %v", err)
	}
	if _, err := m.Decode([]int32{99}); !errors.Is(err, ErrVocabulary) {
		t.Errorf("decode 99: %v", err)
	}
}

func TestConfig(t *testing.T) {
	if n := testModel(t).NumParams(); n != 202176 {
		t.Errorf("default model has %d parameters", n)
	}
	bad := DefaultConfig()
	bad.Vocab = "0120"
	if err := bad.Validate(); err == nil {
		t.Error("a repeated vocabulary character passed")
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	m := testModel(t)
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	m2, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := m2.Marshal()
	if !bytes.Equal(b, b2) {
		t.Error("a decoded model encodes differently")
	}
	if !regexp.MustCompile(`^tiny-arith@[0-9a-f]{12}$`).MatchString(m.Version()) || m.Version() != m2.Version() {
		t.Errorf("versions %q, %q", m.Version(), m2.Version())
	}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
	// A file whose tensor does not fit its config.
	f, _ := safetensors.Unmarshal(b)
	f.Tensors["model.norm.weight"] = safetensors.FromFloat32([]int{3}, []float32{1, 2, 3})
	bad, _ := safetensors.Marshal(f)
	if _, err := Unmarshal(bad); err == nil || !strings.Contains(err.Error(), `tensor "model.norm.weight" has shape [3], the config needs [64]`) {
		t.Errorf("bad shape: %v", err)
	}
}

func generate(t *testing.T, p policy.Policy, reqs []policy.Request, s policy.Sampling) [][]policy.Sample {
	t.Helper()
	out, err := p.Generate(context.Background(), reqs, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(reqs) {
		t.Fatalf("%d results for %d requests", len(out), len(reqs))
	}
	return out
}

// TestKVCacheMatchesScoring checks that the log-probabilities sampling
// returns (KV cache, one token at a time) equal teacher-forced scoring.
func TestKVCacheMatchesScoring(t *testing.T) {
	m := testModel(t)
	p := NewPolicy(m)
	reqs := []policy.Request{{ID: "a", Prompt: "12+34=", Seed: 1}, {ID: "b", Prompt: "7+", Seed: 2}, {ID: "c", Prompt: "", Seed: 3}}
	out := generate(t, p, reqs, policy.Sampling{N: 3, Temperature: 1, MaxTokens: 20, Logprobs: true})
	var batch []Example
	var samples []policy.Sample
	for i, r := range reqs {
		prompt, _ := m.Tokenize(r.Prompt)
		for _, s := range out[i] {
			batch = append(batch, Example{Prompt: prompt, Completion: s.TokenIDs})
			samples = append(samples, s)
		}
	}
	lp, ent, err := m.Score(context.Background(), nil, batch)
	if err != nil {
		t.Fatal(err)
	}
	exact := true
	for i, s := range samples {
		if len(s.Logprobs) != len(s.TokenIDs) || len(lp[i]) != len(s.TokenIDs) {
			t.Fatalf("sample %d: %d logprobs for %d tokens", i, len(s.Logprobs), len(s.TokenIDs))
		}
		for j := range s.Logprobs {
			if d := math.Abs(float64(s.Logprobs[j] - lp[i][j])); d > 1e-4 {
				t.Errorf("sample %d token %d: sampled logprob %g, scored %g", i, j, s.Logprobs[j], lp[i][j])
			}
			exact = exact && s.Logprobs[j] == lp[i][j]
			if !(ent[i][j] > 0) {
				t.Errorf("sample %d token %d: entropy %g", i, j, ent[i][j])
			}
		}
	}
	t.Logf("sampled and scored log-probabilities identical bit for bit: %v", exact)
}

// TestBatchIndependence samples a request alone and among others; its
// samples must be identical bit for bit.
func TestBatchIndependence(t *testing.T) {
	p := NewPolicy(testModel(t))
	target := policy.Request{ID: "t", Prompt: "123+45=", Seed: 42}
	for _, temp := range []float64{0, 0.7, 1} {
		s := policy.Sampling{N: 2, Temperature: temp, TopP: 0.9, MaxTokens: 12, Logprobs: true, Stop: []string{"=="}}
		alone := generate(t, p, []policy.Request{target}, s)[0]
		var reqs []policy.Request
		for i := 0; i < 40; i++ {
			reqs = append(reqs, policy.Request{ID: "o", Prompt: strings.Repeat("9", i%9) + "+1=", Seed: int64(i)})
		}
		reqs[17] = target
		s.N = 3 // more samples per request; sample j is still drawn from SampleSeed(seed, j)
		crowd := generate(t, p, reqs, s)[17]
		for j := range alone {
			a, c := alone[j], crowd[j]
			if a.Text != c.Text || !slices.Equal(a.TokenIDs, c.TokenIDs) || !equalBits(a.Logprobs, c.Logprobs) || a.FinishReason != c.FinishReason {
				t.Errorf("temperature %g, sample %d: alone %q %v, in a batch %q %v", temp, j, a.Text, a.Logprobs, c.Text, c.Logprobs)
			}
		}
	}
}

func equalBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func TestSamplingRules(t *testing.T) {
	m := testModel(t)
	p := NewPolicy(m)
	ctx := m.Config().Context
	reqs := []policy.Request{
		{ID: "ok", Prompt: "1+1=", Seed: 1},
		{ID: "bad-char", Prompt: "1+x=", Seed: 1},
		{ID: "too-long", Prompt: strings.Repeat("1", ctx), Seed: 1},
		{ID: "chat", Messages: []policy.Message{{Role: "system", Content: "1+"}, {Role: "user", Content: "1="}}, Seed: 1},
		{ID: "both", Prompt: "1", Messages: []policy.Message{{Role: "user", Content: "1"}}},
	}
	out := generate(t, p, reqs, policy.Sampling{N: 2, Temperature: 1, MaxTokens: 8})
	for _, i := range []int{1, 2, 4} {
		for _, s := range out[i] {
			if s.Status != policy.StatusInvalid || s.FinishReason != policy.FinishError || s.Error == "" || s.Text != "" {
				t.Errorf("%s: %+v", reqs[i].ID, s)
			}
		}
	}
	if e := out[1][0].Error; !strings.Contains(e, `character 'x' at column 3`) {
		t.Errorf("bad-char error %q", e)
	}
	if e := out[2][0].Error; !strings.Contains(e, "exceed the context of 32") {
		t.Errorf("too-long error %q", e)
	}
	// A MaxTokens so large that prompt + MaxTokens overflows is refused
	// too, not sampled past the context (a panic in a sampling goroutine,
	// which no HTTP handler can recover). High temperature makes EOS rare.
	huge := generate(t, p, reqs[:1], policy.Sampling{N: 64, Temperature: 50, MaxTokens: math.MaxInt})
	if s := huge[0][0]; s.Status != policy.StatusInvalid || !strings.Contains(s.Error, "exceed the context of 32") {
		t.Errorf("max tokens MaxInt: %+v", s)
	}
	// A chat request samples what its concatenated contents would.
	for j := range out[0] {
		if out[3][j].Text != out[0][j].Text || out[0][j].Status != policy.StatusOK {
			t.Errorf("chat sample %d %q, prompt sample %q", j, out[3][j].Text, out[0][j].Text)
		}
		if out[0][j].Index != j || out[0][j].RequestID != "ok" || out[0][j].PromptTokens != 5 || out[0][j].Logprobs != nil {
			t.Errorf("sample %d: %+v", j, out[0][j])
		}
	}
	// MaxTokens and the context.
	long := generate(t, p, []policy.Request{{ID: "x", Prompt: "1", Seed: 3}}, policy.Sampling{N: 8, Temperature: 1.5})
	for _, s := range long[0] {
		if len(s.TokenIDs) > ctx-1 || (s.FinishReason == policy.FinishLength) != (len(s.TokenIDs) == ctx-1) {
			t.Errorf("max tokens 0: %d tokens, finish %s", len(s.TokenIDs), s.FinishReason)
		}
	}
	if _, err := p.Generate(context.Background(), reqs, policy.Sampling{TopP: 2}); err == nil {
		t.Error("top_p 2 accepted")
	}
}

func TestStopStrings(t *testing.T) {
	p := NewPolicy(testModel(t))
	req := []policy.Request{{ID: "x", Prompt: "5+5=", Seed: 9}}
	free := generate(t, p, req, policy.Sampling{N: 4, Temperature: 1, MaxTokens: 20})[0]
	for j, s := range free {
		if len(s.Text) < 3 {
			continue
		}
		stop := s.Text[1:3]
		got := generate(t, p, req, policy.Sampling{N: j + 1, Temperature: 1, MaxTokens: 20, Stop: []string{stop}})[0][j]
		cut := strings.Index(s.Text, stop)
		// The tokens up to the stop string's end: a sampled PAD or BOS
		// (a random model draws them) spells nothing.
		spelled, _ := p.m.Decode(got.TokenIDs)
		if got.Text != s.Text[:cut] || got.FinishReason != policy.FinishStop || spelled != s.Text[:cut+len(stop)] ||
			!slices.Equal(got.TokenIDs, s.TokenIDs[:len(got.TokenIDs)]) {
			t.Errorf("stop %q in %q: got %q (%s, tokens %v of %v)", stop, s.Text, got.Text, got.FinishReason, got.TokenIDs, s.TokenIDs)
		}
	}
}

func TestSeeds(t *testing.T) {
	p := NewPolicy(testModel(t))
	s := policy.Sampling{N: 4, Temperature: 1, MaxTokens: 10}
	a := generate(t, p, []policy.Request{{Prompt: "1+", Seed: 5}}, s)[0]
	b := generate(t, p, []policy.Request{{Prompt: "1+", Seed: 5}}, s)[0]
	distinct := map[string]bool{}
	for j := range a {
		if a[j].Text != b[j].Text {
			t.Errorf("sample %d differs between identical calls", j)
		}
		distinct[a[j].Text] = true
	}
	if len(distinct) < 2 {
		t.Errorf("4 samples at temperature 1 are all %q", a[0].Text)
	}
	g := generate(t, p, []policy.Request{{Prompt: "1+", Seed: 5}, {Prompt: "1+", Seed: 6}}, policy.Sampling{N: 2, MaxTokens: 10})
	if g[0][0].Text != g[0][1].Text || g[0][0].Text != g[1][0].Text {
		t.Errorf("greedy samples differ: %q %q %q", g[0][0].Text, g[0][1].Text, g[1][0].Text)
	}
}

// TestConcurrentUse samples, scores and loads adapters from several
// goroutines at once (run it with -race); results equal the serial ones.
func TestConcurrentUse(t *testing.T) {
	m := testModel(t)
	p := NewPolicy(m)
	ctx := context.Background()
	a, _ := m.NewAdapter(LoRAConfig{Seed: 2})
	dir := filepath.Join(t.TempDir(), "a")
	if err := a.Save(dir); err != nil {
		t.Fatal(err)
	}
	reqs := []policy.Request{{Prompt: "1+", Seed: 1}, {Prompt: "22+3", Seed: 2}}
	s := policy.Sampling{N: 2, Temperature: 1, MaxTokens: 10}
	want := generate(t, p, reqs, s)
	done := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			if g%4 == 3 {
				done <- p.LoadAdapter(ctx, "a", dir)
				return
			}
			out, err := p.Generate(ctx, reqs, s)
			if err == nil && out[1][1].Text != want[1][1].Text {
				err = errors.New("concurrent samples differ")
			}
			if err == nil {
				_, _, err = m.Score(ctx, nil, []Example{{Prompt: []int32{4}, Completion: []int32{5, EOS}}})
			}
			done <- err
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Generate(cctx, reqs, s); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
}

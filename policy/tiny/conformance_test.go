package tiny_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/policytest"
	"github.com/rlpipe/rlpipe/policy/server"
	"github.com/rlpipe/rlpipe/policy/server/servertest"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// TestConformance runs the policy suite against the shipped model in
// process, and behind a policy server on loopback through the OpenAI
// client: the same checks and the same exact samples both ways.
func TestConformance(t *testing.T) {
	dir := offByOne(t)
	t.Run("InProcess", func(t *testing.T) {
		policytest.Run(t, func(t *testing.T) policytest.Backend {
			return tinyBackend(tiny.NewPolicy(embedded(t)), dir)
		})
	})
	t.Run("HTTP", func(t *testing.T) {
		policytest.Run(t, func(t *testing.T) policytest.Backend {
			m := embedded(t)
			c, _ := servertest.Loopback(t, tiny.NewPolicy(m), &server.Options{Model: m.Version()}, nil)
			return tinyBackend(c, dir)
		})
	})
}

// version is the shipped weights' PolicyVersion (TestEmbedded pins
// their checksum).
const version = "tiny-arith@94322e33363d"

func embedded(t *testing.T) *tiny.Model {
	t.Helper()
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// offByOne trains a small LoRA adapter of the shipped model to answer
// a+b+1 on four problems (20 AdamW steps, deterministic) and saves it as
// a PEFT directory.
func offByOne(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	m := embedded(t)
	a, err := m.NewAdapter(tiny.LoRAConfig{Name: "off-by-one", Rank: 4, Alpha: 8, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tiny.NewTrainer(m, a, tiny.TrainConfig{LR: 1e-2, ClipNorm: 1})
	if err != nil {
		t.Fatal(err)
	}
	var batch []tiny.Example
	for _, p := range []tiny.Problem{{A: 123, B: 456}, {A: 300, B: 45}, {A: 17, B: 25}, {A: 61, B: 8}} {
		e, err := m.Example(p)
		if err != nil {
			t.Fatal(err)
		}
		wrong, err := m.Tokenize(tiny.Problem{A: p.A, B: p.B + 1}.Answer())
		if err != nil {
			t.Fatal(err)
		}
		e.Completion = append(wrong, tiny.EOS)
		batch = append(batch, e)
	}
	for range 20 {
		if _, err := tr.Step(ctx, batch, tiny.NLL); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "off-by-one")
	if err := a.Save(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tinyBackend describes the shipped model served by p, with the adapter
// in dir, and pins its samples.
func tinyBackend(p policy.Policy, dir string) policytest.Backend {
	sum := []policy.Request{{ID: "sum", Prompt: "123+456=", Seed: 1}}
	ok := func(id string, index int, text string, tokens []int32, logprobs []float32, finish string, prompt int) policy.Sample {
		return policy.Sample{RequestID: id, Index: index, Text: text, TokenIDs: tokens, Logprobs: logprobs,
			FinishReason: finish, PromptTokens: prompt, PolicyVersion: version, Status: policy.StatusOK}
	}
	tuned := func(s policy.Sample) policy.Sample { s.PolicyVersion += "+" + policytest.AdapterName; return s }
	stopped := func(s policy.Sample, stop string) policy.Sample { s.StopReason = stop; return s }
	return policytest.Backend{
		Policy: p,
		// The model is fairly sure of the first sum, less of the others.
		Prompts:    []string{"123+456=", "77+642=", "95+406="},
		MaxTokens:  6,
		Invalid:    "12+x=",
		Version:    version,
		AdapterDir: dir,
		Golden: []policytest.Golden{
			{Name: "greedy", Requests: sum, Sampling: policy.Sampling{MaxTokens: 6, Logprobs: true},
				Want: [][]policy.Sample{{ok("sum", 0, "579", []int32{8, 10, 12, 2}, []float32{-0.22945404, -0.1064167, -0.009728432, -0.00012779236}, policy.FinishStop, 9)}}},
			{Name: "max tokens", Requests: sum, Sampling: policy.Sampling{MaxTokens: 2, Logprobs: true},
				Want: [][]policy.Sample{{ok("sum", 0, "57", []int32{8, 10}, []float32{-0.22945404, -0.1064167}, policy.FinishLength, 9)}}},
			{Name: "stop string", Requests: sum, Sampling: policy.Sampling{MaxTokens: 6, Stop: []string{"9"}},
				Want: [][]policy.Sample{{stopped(ok("sum", 0, "57", []int32{8, 10, 12}, nil, policy.FinishStop, 9), "9")}}},
			{Name: "seeded", Requests: []policy.Request{{ID: "a", Prompt: "77+642=", Seed: 42}},
				Sampling: policy.Sampling{N: 3, Temperature: 1, MaxTokens: 6, Logprobs: true},
				Want: [][]policy.Sample{{
					ok("a", 0, "710", []int32{10, 4, 3, 2}, []float32{-0.58174133, -2.3356476, -1.0121164, -6.866455e-05}, policy.FinishStop, 8),
					ok("a", 1, "829", []int32{11, 5, 12, 2}, []float32{-0.81860924, -0.12964058, -0.45877552, -7.915497e-05}, policy.FinishStop, 8),
					ok("a", 2, "729", []int32{10, 5, 12, 2}, []float32{-0.58174133, -0.11196041, -0.3457346, -7.915497e-05}, policy.FinishStop, 8),
				}}},
			{Name: "chat", Requests: []policy.Request{{ID: "c", Messages: []policy.Message{{Role: "system", Content: "95+"}, {Role: "user", Content: "406="}}, Seed: 5}},
				Sampling: policy.Sampling{N: 2, Temperature: 0.7, TopP: 0.9, MaxTokens: 6},
				Want: [][]policy.Sample{{
					ok("c", 0, "402", []int32{7, 3, 5, 2}, nil, policy.FinishStop, 8),
					ok("c", 1, "401", []int32{7, 3, 4, 2}, nil, policy.FinishStop, 8),
				}}},
			{Name: "adapter", Requests: []policy.Request{sum[0], {ID: "b", Prompt: "17+25=", Seed: 2}},
				Sampling: policy.Sampling{MaxTokens: 6, Logprobs: true, Adapter: policytest.AdapterName},
				Want: [][]policy.Sample{
					{tuned(ok("sum", 0, "580", []int32{8, 11, 3, 2}, []float32{-0.0069332123, -0.003162384, -0.004005432, -0.0045080185}, policy.FinishStop, 9))},
					{tuned(ok("b", 0, "43", []int32{7, 6, 2}, []float32{-0.013758659, -0.044696808, -0.00076293945}, policy.FinishStop, 7))},
				}},
		},
	}
}

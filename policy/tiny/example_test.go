package tiny_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

func Example() {
	m, err := tiny.Embedded()
	if err != nil {
		log.Fatal(err)
	}
	p := tiny.NewPolicy(m)
	out, err := p.Generate(context.Background(),
		[]policy.Request{{ID: "q1", Prompt: "123+456=", Seed: 1}},
		policy.Sampling{N: 1, Temperature: 0, MaxTokens: 6, Logprobs: true})
	if err != nil {
		log.Fatal(err)
	}
	s := out[0][0]
	fmt.Println(s.Text, s.FinishReason, len(s.TokenIDs), s.Status)
	// Output: 579 stop 4 ok
}

// Example_lora trains a LoRA adapter for a step, saves it as a PEFT
// directory and samples from it through the policy.
func Example_lora() {
	ctx := context.Background()
	m, err := tiny.Embedded()
	if err != nil {
		log.Fatal(err)
	}
	a, err := m.NewAdapter(tiny.LoRAConfig{Name: "demo", Rank: 8, Alpha: 16, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	tr, err := tiny.NewTrainer(m, a, tiny.TrainConfig{LR: 1e-3, ClipNorm: 1})
	if err != nil {
		log.Fatal(err)
	}
	var batch []tiny.Example
	for _, p := range []tiny.Problem{{A: 123, B: 456}, {A: 300, B: 45}} {
		e, err := m.Example(p) // "123+456=" → "579" EOS
		if err != nil {
			log.Fatal(err)
		}
		batch = append(batch, e)
	}
	st, err := tr.Step(ctx, batch, tiny.NLL)
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "tiny-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := a.Save(filepath.Join(dir, "step-1")); err != nil {
		log.Fatal(err)
	}
	p := tiny.NewPolicy(m)
	if err := p.LoadAdapter(ctx, "step-1", filepath.Join(dir, "step-1")); err != nil {
		log.Fatal(err)
	}
	out, err := p.Generate(ctx, []policy.Request{{Prompt: "123+456="}}, policy.Sampling{Adapter: "step-1", MaxTokens: 5})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Step, out[0][0].Text, out[0][0].PolicyVersion == m.Version()+"+step-1")
	// Output: 1 579 true
}

func ExampleHeldOut() {
	fmt.Println(tiny.HeldOut(123, 456), tiny.Problem{A: 123, B: 456}.Prompt())
	// Output: false 123+456=
}

// Example_critic values a completion with a fresh critic (every value
// 0), takes value-loss steps towards a return of 1 on each token, and
// values it again.
func Example_critic() {
	ctx := context.Background()
	m, err := tiny.Embedded()
	if err != nil {
		log.Fatal(err)
	}
	c, err := m.NewCritic(tiny.LoRAConfig{Rank: 8, Alpha: 16, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	e, err := m.Example(tiny.Problem{A: 123, B: 456}) // "123+456=" → "579" EOS
	if err != nil {
		log.Fatal(err)
	}
	batch := []tiny.Example{e}
	before, err := m.Values(ctx, c, batch)
	if err != nil {
		log.Fatal(err)
	}
	tr, err := tiny.NewCriticTrainer(m, c, tiny.TrainConfig{LR: 1e-2})
	if err != nil {
		log.Fatal(err)
	}
	toOne := func(values, grad [][]float64) (float64, error) { // ½·Σ(V − 1)²
		var l float64
		for i, row := range values {
			for j, v := range row {
				l += 0.5 * (v - 1) * (v - 1)
				grad[i][j] = v - 1
			}
		}
		return l, nil
	}
	for range 20 {
		if _, err := tr.StepValues(ctx, batch, toOne); err != nil {
			log.Fatal(err)
		}
	}
	after, err := m.Values(ctx, c, batch)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d tokens, values %v, then all within 0.5 of 1: %t\n", len(before[0]), before[0], near(after[0], 1, 0.5))
	// Output: 4 tokens, values [0 0 0 0], then all within 0.5 of 1: true
}

// near reports whether every x is within d of want.
func near(xs []float64, want, d float64) bool {
	for _, x := range xs {
		if x < want-d || x > want+d {
			return false
		}
	}
	return true
}

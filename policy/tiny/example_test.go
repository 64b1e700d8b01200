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

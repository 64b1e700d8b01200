package tiny

import (
	"context"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

func TestExactPass(t *testing.T) {
	m, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	probs := HeldOutProblems(300)
	prompts := make([]tables.Prompt, len(probs))
	for i, p := range probs {
		prompts[i] = tables.Prompt{PromptID: p.Prompt(), Prompt: p.Prompt(), Answer: p.Answer()}
	}
	exact := m.ExactPass
	got, err := exact(ctx, "", prompts)
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.PassProbabilities(ctx, nil, probs)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("problem %s: %.17g, PassProbabilities says %.17g", prompts[i].PromptID, got[i], want[i])
		}
		sum += got[i]
	}
	if mean := sum / float64(len(got)); mean != embeddedPass1 {
		t.Errorf("mean %.17g, want %.17g", mean, embeddedPass1)
	}

	// A fresh adapter (B = 0) changes nothing: loaded from its directory,
	// it gives the base model's probabilities bit for bit.
	a, err := m.NewAdapter(LoRAConfig{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := a.Save(dir); err != nil {
		t.Fatal(err)
	}
	withAdapter, err := exact(ctx, dir, prompts[:3])
	if err != nil {
		t.Fatal(err)
	}
	for i := range withAdapter {
		if withAdapter[i] != want[i] {
			t.Errorf("problem %s with a fresh adapter: %.17g, want %.17g", prompts[i].PromptID, withAdapter[i], want[i])
		}
	}

	// A character outside the vocabulary names the problem.
	for _, bad := range []tables.Prompt{
		{PromptID: "p7", Prompt: "2*3=", Answer: "6"},
		{PromptID: "p8", Prompt: "2+3=", Answer: "five"},
	} {
		_, err := exact(ctx, "", []tables.Prompt{bad})
		if err == nil || !strings.HasPrefix(err.Error(), "problem "+bad.PromptID+": ") {
			t.Errorf("%+v: err = %v, want it to name the problem", bad, err)
		}
	}
}

package tiny_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// The embedded policy loads full weights of its model's shape beside
// adapters: a request naming them samples what that model samples, with
// the version "<base>+<name>"; unloaded, the name is an error; and
// evaluation's exact pass@1 scores the checkpoint's own weights.
func TestPolicyLoadsFullWeights(t *testing.T) {
	ctx := context.Background()
	base, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	other, err := tiny.New(tiny.DefaultConfig(), 3) // same shape, other weights
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "w")
	if err := other.ExportHFSharded(dir, 100<<10); err != nil {
		t.Fatal(err)
	}
	p := tiny.NewPolicy(base)
	if err := p.LoadWeights(ctx, "weights-0123456789ab", dir); err != nil {
		t.Fatal(err)
	}
	reqs := []policy.Request{{ID: "q", Prompt: "1+2=", Seed: 4}}
	s := policy.Sampling{N: 3, Temperature: 1, MaxTokens: 4, Adapter: "weights-0123456789ab"}
	got, err := p.Generate(ctx, reqs, s)
	if err != nil {
		t.Fatal(err)
	}
	s.Adapter = ""
	want, err := other.Generate(ctx, nil, reqs, s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want[0] {
		want[0][i].PolicyVersion = base.Version() + "+weights-0123456789ab"
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("samples of the loaded weights\n%+v\nwant the model's\n%+v", got, want)
	}
	prompts := []tables.Prompt{{PromptID: "q", Prompt: "1+2=", Answer: "3"}}
	exact, err := base.ExactPass(ctx, dir, prompts)
	if err != nil {
		t.Fatal(err)
	}
	wantExact, err := other.ExactPass(ctx, "", prompts)
	if err != nil || !reflect.DeepEqual(exact, wantExact) {
		t.Fatalf("exact pass@1 of the checkpoint %v (%v), want the model's %v", exact, err, wantExact)
	}
	if err := p.UnloadWeights(ctx, "weights-0123456789ab"); err != nil {
		t.Fatal(err)
	}
	s.Adapter = "weights-0123456789ab"
	_, err = p.Generate(ctx, reqs, s)
	if want := `tiny policy: adapter "weights-0123456789ab": adapter not loaded`; err == nil || err.Error() != want || !errors.Is(err, policy.ErrAdapterNotLoaded) {
		t.Fatalf("after unloading: err = %v, want %q", err, want)
	}
	err = p.UnloadWeights(ctx, "weights-0123456789ab")
	if want := `tiny policy: unload weights "weights-0123456789ab": adapter not loaded`; err == nil || err.Error() != want {
		t.Fatalf("unloading twice: err = %v, want %q", err, want)
	}
}

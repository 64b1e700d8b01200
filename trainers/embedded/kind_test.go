package embedded_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/embedded"
)

// plainModel is an in-process model with no capability beyond its name:
// not an embedded.Trainable.
type plainModel struct{}

func (plainModel) Version() string { return "plain@0" }

// The grpo stage trains the opened policy's model when it is an
// embedded.Trainable; any other model, behind a server whose model key
// names no embedded model, is refused with what to set.
func TestGRPOStageFindsTrainable(t *testing.T) {
	m := embeddedModel(t)
	opts := embedded.Options{LR: 0.002, LoRA: embedded.LoRAOptions{Rank: 4}}
	want := embedded.Task(m, opts).Version
	const refused = "the grpo stage trains the embedded model; set policy: {kind: embedded}, or policy.model to an embedded model a server serves"
	cases := []struct {
		name    string
		model   policy.Local
		wantErr string
	}{
		{"the embedded model", m, ""},
		{"a server: no model in this process", nil, refused},
		{"an in-process model without the capability", plainModel{}, refused},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opened := &policy.Opened{Policy: tiny.NewPolicy(m), Identity: "served", Model: c.model}
			defer opened.Close()
			s := embedded.GRPOStage(opts)
			task, err := s.Task(kind.Build{Slot: "train", Env: "train", File: kind.File{Policy: "openai", PolicyModel: "served"}, Policy: opened})
			if c.wantErr != "" {
				if err == nil || err.Error() != c.wantErr {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if task.Version != want {
				t.Errorf("train task version %s, want %s (the opened model's)", task.Version, want)
			}
		})
	}
}

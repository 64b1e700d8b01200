package tiny

import (
	"fmt"

	"github.com/rlpipe/rlpipe/policy"
)

// LoadWeightsDir reads a full-weights checkpoint directory (what a full
// fine-tune writes: a Hugging Face model directory, sharded or not) whose
// model has the shape of base: its shards checked against their index
// (policy.CheckShards), then LoadHF. The model keeps base's name, so its
// figures and exports read as the same model's. A model of another shape
// or vocabulary is an error wrapping policy.ErrWeightsShape.
func LoadWeightsDir(base *Model, dir string) (*Model, error) {
	if err := policy.CheckShards(dir); err != nil {
		return nil, err
	}
	m, err := LoadHF(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, policy.ErrWeightsShape)
	}
	got, want := m.cfg, base.cfg
	got.Name, want.Name = "", ""
	if got != want {
		return nil, fmt.Errorf("load weights %s: the model is %s, not %s of %s: %w", dir, shape(got), shape(want), base.cfg.Name, policy.ErrWeightsShape)
	}
	m.cfg.Name = base.cfg.Name
	return m, nil
}

// shape describes a configuration's shape for messages.
func shape(c Config) string {
	return fmt.Sprintf("dim %d, %d heads of %d, %d layers, MLP %d, context %d, %d tokens", c.Dim, c.Heads, c.headDim(), c.Layers, c.Hidden, c.Context, c.VocabSize())
}

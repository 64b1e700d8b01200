package config

import (
	"encoding/json"
	"fmt"

	"github.com/goccy/go-yaml"
)

// defaulter is a kind's options that can fill in their own defaults (the
// embedded trainer's LoRA rank, ε, learning rate).
type defaulter interface{ EnsureDefaults() }

// Effective returns the config as it runs: YAML (YAML's form, secrets
// redacted) with every default filled in, Parse's and those of every
// stage, policy and tracker whose options fill in their own
// (EnsureDefaults). It is what `rlpipe compare` diffs, what trackers
// receive as the run's config and what the UI shows. c is not changed:
// the defaults go into a copy, parsed again from c's YAML, so that c,
// the config the run records and hashes, stays as the file wrote it.
func (c *Config) Effective() ([]byte, error) {
	b, err := c.YAML()
	if err != nil {
		return nil, err
	}
	cp, err := Parse(c.file, b, c.reg)
	if err != nil {
		return nil, fmt.Errorf("fill in the defaults of %s: %w", c.file, err)
	}
	var opts []any
	for _, s := range []*Stage{cp.Stages.Sample, cp.Stages.Generate, cp.Stages.Reward, cp.Stages.Train} {
		if s != nil {
			opts = append(opts, s.Options)
		}
	}
	if cp.Policy != nil {
		opts = append(opts, cp.Policy.Options)
	}
	for _, t := range cp.Tracking {
		opts = append(opts, t.Options)
	}
	for _, o := range opts {
		if d, ok := o.(defaulter); ok {
			d.EnsureDefaults()
		}
	}
	return cp.YAML()
}

// EffectiveKeys is Effective flattened to dotted keys
// ("trainer.lora.rank": "8"); a list is one value, written as JSON
// ("eval.k": "[1,4]").
func (c *Config) EffectiveKeys() (map[string]string, error) {
	b, err := c.Effective()
	if err != nil {
		return nil, err
	}
	return FlatKeys(b)
}

// FlatKeys flattens a config's YAML (Effective's, or a run's recorded
// config) to dotted keys as EffectiveKeys does.
func FlatKeys(config []byte) (map[string]string, error) {
	var tree any
	if err := yaml.Unmarshal(config, &tree); err != nil {
		return nil, fmt.Errorf("read back the effective config: %w", err)
	}
	flat := map[string]string{}
	flatten(flat, "", tree)
	return flat, nil
}

// flatten writes v's leaves into flat under dotted keys; a list is one
// value, written as JSON.
func flatten(flat map[string]string, key string, v any) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 && key != "" {
			flat[key] = "{}"
		}
		for k, x := range v {
			if key != "" {
				k = key + "." + k
			}
			flatten(flat, k, x)
		}
	case []any:
		b, err := json.Marshal(v)
		if err != nil {
			b = []byte(fmt.Sprint(v))
		}
		flat[key] = string(b)
	case nil:
		flat[key] = "null"
	default:
		flat[key] = fmt.Sprint(v)
	}
}

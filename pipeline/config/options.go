package config

import (
	"context"
	"reflect"

	"github.com/goccy/go-yaml"

	"github.com/rlpipe/rlpipe/internal/yamlcore"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// registryKey carries the registry to the unmarshalers below.
type registryKey struct{}

// registryOf is the registry ctx carries, or an empty one.
func registryOf(ctx context.Context) *kind.Registry {
	if reg, _ := ctx.Value(registryKey{}).(*kind.Registry); reg != nil {
		return reg
	}
	return &kind.Registry{}
}

// UnmarshalYAML decodes the keys every stage has, then the kind's own
// into the value its New returns (a kind with a section of its own gets
// it from Config's UnmarshalYAML).
func (s *Stage) UnmarshalYAML(ctx context.Context, unmarshal func(any) error) error {
	type plain Stage
	if err := unmarshal((*plain)(s)); err != nil {
		return err
	}
	k, ok := registryOf(ctx).Lookup(s.Kind)
	if !ok {
		return nil
	}
	s.Options = k.New()
	if sk, ok := k.(kind.Sectioned); ok {
		s.section = sk.Section()
		return nil
	}
	return unmarshal(s.Options)
}

// UnmarshalYAML decodes kind and model, then the backend's keys into the
// value its Options method returns.
func (p *Policy) UnmarshalYAML(ctx context.Context, unmarshal func(any) error) error {
	type plain Policy
	if err := unmarshal((*plain)(p)); err != nil {
		return err
	}
	b, ok := registryOf(ctx).Policies.Lookup(p.Kind)
	if !ok {
		return nil
	}
	if p.Options = b.Options(); p.Options == nil {
		return nil
	}
	return unmarshal(p.Options)
}

// UnmarshalYAML decodes kind, then the backend's keys into the value its
// Options method returns.
func (t *Tracker) UnmarshalYAML(ctx context.Context, unmarshal func(any) error) error {
	var k struct {
		Kind string `yaml:"kind"`
	}
	if err := unmarshal(&k); err != nil {
		return err
	}
	t.Kind = k.Kind
	b, ok := registryOf(ctx).Trackers.Lookup(t.Kind)
	if !ok {
		return nil
	}
	if t.Options = b.Options(); t.Options == nil {
		return nil
	}
	return unmarshal(t.Options)
}

// MarshalYAML writes kind, then the backend's keys.
func (t Tracker) MarshalYAML() (any, error) {
	own, err := ordered(t.Options)
	return append(yaml.MapSlice{{Key: "kind", Value: t.Kind}}, own...), err
}

// UnmarshalYAML decodes the file, then the top-level sections of the
// stages' kinds (grpo: trainer) into their stages' options.
func (c *Config) UnmarshalYAML(unmarshal func(any) error) error {
	type plain Config
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	for _, s := range c.Stages.all() {
		if s == nil || s.section == "" {
			continue
		}
		// A struct of one field, the section, typed as the kind's options.
		t := reflect.StructOf([]reflect.StructField{{Name: "Section", Type: reflect.TypeOf(s.Options),
			Tag: reflect.StructTag(`yaml:"` + s.section + `"`)}})
		v := reflect.New(t)
		if err := unmarshal(v.Interface()); err != nil {
			return err
		}
		if got := v.Elem().Field(0); !got.IsNil() {
			s.Options = got.Interface().(kind.Stage)
		}
	}
	return nil
}

// MarshalYAML writes the common keys, then the kind's own in the order of
// its fields (a kind with a section writes it at the top level instead).
func (s *Stage) MarshalYAML() (any, error) {
	out := yaml.MapSlice{{Key: "kind", Value: s.Kind}}
	if s.Env != "" {
		out = append(out, yaml.MapItem{Key: "env", Value: s.Env})
	}
	if s.Version != "" {
		out = append(out, yaml.MapItem{Key: "version", Value: s.Version})
	}
	if s.Settings != nil {
		out = append(out, yaml.MapItem{Key: "settings", Value: s.Settings})
	}
	if s.section != "" {
		return out, nil
	}
	own, err := ordered(s.Options)
	return append(out, own...), err
}

// MarshalYAML writes kind and model, then the backend's keys.
func (p *Policy) MarshalYAML() (any, error) {
	out := yaml.MapSlice{{Key: "kind", Value: p.Kind}}
	if p.Model != "" {
		out = append(out, yaml.MapItem{Key: "model", Value: p.Model})
	}
	own, err := ordered(p.Options)
	return append(out, own...), err
}

// ordered is v's keys as YAML writes them (empty ones left out), in order.
func ordered(v any) (yaml.MapSlice, error) {
	if v == nil || (reflect.ValueOf(v).Kind() == reflect.Pointer && reflect.ValueOf(v).IsNil()) {
		return nil, nil
	}
	b, err := yaml.MarshalWithOptions(v, yaml.OmitEmpty(), quoteSpace)
	if err != nil {
		return nil, err
	}
	var m yaml.MapSlice
	if err := yamlcore.Unmarshal(b, &m, yaml.UseOrderedMap()); err != nil {
		return nil, err
	}
	return m, nil
}

package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/rlpipe/rlpipe/internal/yamlcore"
	"github.com/rlpipe/rlpipe/pipeline"
)

// YAML returns the effective config as YAML, every secret value replaced
// by "<redacted>": what a run records as run/config.yaml.
func (c *Config) YAML() ([]byte, error) {
	b, err := yaml.MarshalWithOptions(c, yaml.IndentSequence(true), yaml.OmitEmpty(), quoteSpace)
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	var tree any
	if err := yamlcore.Unmarshal(b, &tree, yaml.UseOrderedMap()); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	if tree, err = c.withSections(tree); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	out, err := yaml.MarshalWithOptions(redact(tree), yaml.IndentSequence(true), quoteSpace)
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return out, nil
}

// withSections adds the top-level sections of the stages' kinds (grpo:
// trainer) that the file has, where the file's sections go: before eval,
// machine, environments and stages.
func (c *Config) withSections(tree any) (any, error) {
	top, ok := tree.(yaml.MapSlice)
	if !ok {
		return tree, nil
	}
	var add yaml.MapSlice
	for _, slot := range pipeline.SlotNames() {
		s := c.Stages.all()[slot]
		if s == nil || s.section == "" || !c.set(s.section) {
			continue
		}
		own, err := ordered(s.Options)
		if err != nil {
			return nil, err
		}
		if own == nil {
			own = yaml.MapSlice{}
		}
		add = append(add, yaml.MapItem{Key: s.section, Value: own})
	}
	if len(add) == 0 {
		return tree, nil
	}
	at := len(top)
	for i, it := range top {
		if k := fmt.Sprint(it.Key); k == "eval" || k == "machine" || k == "environments" || k == "stages" {
			at = i
			break
		}
	}
	out := append(append(append(yaml.MapSlice{}, top[:at]...), add...), top[at:]...)
	return out, nil
}

// set reports whether the file names path.
func (c *Config) set(path string) bool { _, ok := c.pos[path]; return ok }

// quoteSpace writes a string with a newline, tab or carriage return, or
// with leading or trailing space, double-quoted: the YAML library would
// write "\n" (a common stop sequence) as an empty block that reads back
// as "", and several such strings as YAML it cannot read back at all.
// So is a string that Parse would read as a float (the library quotes
// "2.5" but not "1e3").
var quoteSpace = yaml.CustomMarshaler[string](func(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\n\r\t") || strings.TrimSpace(s) != s || yamlcore.IsFloat(s) {
		return []byte(strconv.Quote(s)), nil
	}
	return yaml.Marshal(s)
})

// prunable are sections that mean nothing when empty.
var prunable = map[string]bool{"resources": true, "retries": true, "cache": true, "overlap": true}

// redact replaces the values of secret keys at any depth, and drops
// sections left empty (all their keys at defaults).
func redact(v any) any {
	switch t := v.(type) {
	case yaml.MapSlice:
		out := make(yaml.MapSlice, 0, len(t))
		for _, it := range t {
			if k, ok := it.Key.(string); ok && pipeline.IsSecret(k) && it.Value != nil {
				out = append(out, yaml.MapItem{Key: it.Key, Value: pipeline.Redacted})
				continue
			}
			val := redact(it.Value)
			if m, ok := val.(yaml.MapSlice); ok && len(m) == 0 && prunable[fmt.Sprint(it.Key)] {
				continue
			}
			out = append(out, yaml.MapItem{Key: it.Key, Value: val})
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = redact(e)
		}
		return out
	}
	return v
}

// Hash identifies what the config makes a run do: a SHA-256 of the
// redacted effective config without run and store (which name where the
// results go, not what they are). Two configs that differ only in
// formatting, comments, secrets, run name or trackers hash the same
// (trackers receive the results, they do not change them).
func (c *Config) Hash() (string, error) {
	cp := *c
	cp.Run, cp.Store, cp.Tracking = "", "", nil
	b, err := cp.YAML()
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:]), nil
}

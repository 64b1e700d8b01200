package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
)

// Redacted replaces the value of a secret key.
const Redacted = "<redacted>"

// IsSecret reports whether a key names a secret: it contains api_key,
// apikey, secret or password, or has a word "token" (hf_token,
// GITHUB_TOKEN, but not max_tokens), case-insensitively.
func IsSecret(key string) bool {
	k := strings.ToLower(key)
	for _, s := range []string{"api_key", "apikey", "api-key", "secret", "password", "passwd"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	for _, w := range strings.FieldsFunc(k, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		if w == "token" {
			return true
		}
	}
	return false
}

// YAML returns the effective config as YAML, every secret value replaced
// by "<redacted>": what a run records as run/config.yaml.
func (c *Config) YAML() ([]byte, error) {
	b, err := yaml.MarshalWithOptions(c, yaml.IndentSequence(true), yaml.OmitEmpty())
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	var tree any
	if err := yaml.UnmarshalWithOptions(b, &tree, yaml.UseOrderedMap()); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	out, err := yaml.MarshalWithOptions(redact(tree), yaml.IndentSequence(true))
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return out, nil
}

// prunable are sections that mean nothing when empty.
var prunable = map[string]bool{"resources": true, "retries": true, "cache": true, "overlap": true}

// redact replaces the values of secret keys at any depth, and drops
// sections left empty (all their keys at defaults).
func redact(v any) any {
	switch t := v.(type) {
	case yaml.MapSlice:
		out := make(yaml.MapSlice, 0, len(t))
		for _, it := range t {
			if k, ok := it.Key.(string); ok && IsSecret(k) && it.Value != nil {
				out = append(out, yaml.MapItem{Key: it.Key, Value: Redacted})
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
// formatting, comments, secrets or run name hash the same.
func (c *Config) Hash() (string, error) {
	cp := *c
	cp.Run, cp.Store = "", ""
	b, err := cp.YAML()
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:]), nil
}

package pipeline

import "strings"

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

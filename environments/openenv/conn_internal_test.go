package openenv

import (
	"bytes"
	"encoding/json"
	"testing"
)

// tolerate leaves valid JSON as it is (NaN in a string included) and
// turns Python's bare NaN/Infinity tokens into strings a reply decodes
// with.
func FuzzTolerate(f *testing.F) {
	for _, s := range []string{
		`{"reward": NaN}`, `{"reward": -Infinity, "x": "NaN \" Infinity"}`, `{"a": [Infinity, 1]}`,
		`{"text": "NaN"}`, `"\\"`, `not json`, `{"reward": 1.5}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out := tolerate(b)
		if json.Valid(b) && !bytes.Equal(out, b) {
			t.Fatalf("valid JSON %q became %q", b, out)
		}
	})
}

func TestTolerate(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"reward": NaN, "t": "NaN"}`, `{"reward": "\u0000nonfinite:NaN", "t": "NaN"}`},
		{`[Infinity,-Infinity]`, `["\u0000nonfinite:Infinity","\u0000nonfinite:-Infinity"]`},
		{`{"s": "a\"NaN"}`, `{"s": "a\"NaN"}`},
	} {
		if got := string(tolerate([]byte(c.in))); got != c.want {
			t.Errorf("tolerate(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

package runners

import (
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/judge"
)

// TestDecodeNumbers: a judge's and a verifier's keys read numbers as a
// pipeline file does (YAML 1.2: temperature: 1e-3 is a float), and a key
// that takes an integer refuses a fraction or an exponent, naming the
// runner, its line and the key, where the YAML library would truncate.
func TestDecodeNumbers(t *testing.T) {
	const judgeSpec = "judges:\n  - name: j\n    base_url: http://127.0.0.1:9/v1\n    model: m\n    rubric: r\n    temperature: 1e-3\n    price_in_per_mtok: 2.5E-1\n    max_tokens: MAXTOK\ncomponents:\n  - {name: a, expr: '1.0'}\n"
	parse := func(t *testing.T, src string) rewards.Runner {
		t.Helper()
		s, err := rewards.ParseSpec("spec.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Judges)+len(s.Verifiers) != 1 {
			t.Fatalf("spec %+v", s)
		}
		if len(s.Judges) == 1 {
			return s.Judges[0]
		}
		return s.Verifiers[0]
	}
	t.Run("floats", func(t *testing.T) {
		var c judge.Config
		src := replace(judgeSpec, "MAXTOK", "64")
		if err := decode("judge", parse(t, src), &c); err != nil {
			t.Fatal(err)
		}
		if c.Temperature != 1e-3 || c.PriceInPerMTok != 0.25 || c.MaxTokens != 64 {
			t.Errorf("temperature %g, price_in_per_mtok %g, max_tokens %d", c.Temperature, c.PriceInPerMTok, c.MaxTokens)
		}
	})
	t.Run("a string keeps its text", func(t *testing.T) {
		src := "verifiers:\n  - name: v\n    command: [cat]\n    stdin: 1e3\n    expected_stdout: 2E2\n    limits: {procs: 4}\ncomponents:\n  - {name: a, expr: '1.0'}\n"
		var c VerifierConfig
		if err := decode("verifier", parse(t, src), &c); err != nil {
			t.Fatal(err)
		}
		if c.Stdin != "1e3" || c.ExpectedStdout == nil || *c.ExpectedStdout != "2E2" || c.Limits.Procs != 4 {
			t.Errorf("stdin %q, expected_stdout %v, procs %d", c.Stdin, c.ExpectedStdout, c.Limits.Procs)
		}
	})
	for _, c := range []struct {
		name, kind, src string
		into            any
		want            string
	}{
		{"a fraction for an integer", "judge", replace(judgeSpec, "MAXTOK", "2.5"), &judge.Config{},
			`judge "j" (line 2): max_tokens: expected an integer, got 2.5`},
		{"an exponent for an integer", "judge", replace(judgeSpec, "MAXTOK", "1e3"), &judge.Config{},
			`judge "j" (line 2): max_tokens: expected an integer, got 1e3`},
		{"a nested integer", "verifier", "verifiers:\n  - name: v\n    command: [cat]\n    limits: {procs: 4.5}\ncomponents:\n  - {name: a, expr: '1.0'}\n", &VerifierConfig{},
			`verifier "v" (line 2): limits.procs: expected an integer, got 4.5`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := decode(c.kind, parse(t, c.src), c.into); err == nil || err.Error() != c.want {
				t.Fatalf("decode = %v\nwant     %s", err, c.want)
			}
		})
	}
}

func replace(s string, pairs ...string) string {
	for i := 0; i+1 < len(pairs); i += 2 {
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return s
}

package runners

import (
	"errors"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/judge"
)

// TestDecodeNumbers: a judge's and a verifier's keys read numbers as a
// pipeline file does (YAML 1.2: temperature: 1e-3 is a float), and a key
// that takes an integer refuses a fraction or an exponent, naming the
// file, the key's line and column, the runner and the key, where the YAML
// library would truncate.
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
		if err := decode("spec.yaml", "judge", parse(t, src), &c); err != nil {
			t.Fatal(err)
		}
		if c.Temperature != 1e-3 || c.PriceInPerMTok != 0.25 || c.MaxTokens != 64 {
			t.Errorf("temperature %g, price_in_per_mtok %g, max_tokens %d", c.Temperature, c.PriceInPerMTok, c.MaxTokens)
		}
	})
	t.Run("a string keeps its text", func(t *testing.T) {
		src := "verifiers:\n  - name: v\n    command: [cat]\n    stdin: 1e3\n    expected_stdout: 2E2\n    limits: {procs: 4}\ncomponents:\n  - {name: a, expr: '1.0'}\n"
		var c VerifierConfig
		if err := decode("spec.yaml", "verifier", parse(t, src), &c); err != nil {
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
			`spec.yaml:8:5: judge "j": max_tokens: expected an integer, got 2.5`},
		{"an exponent for an integer", "judge", replace(judgeSpec, "MAXTOK", "1e3"), &judge.Config{},
			`spec.yaml:8:5: judge "j": max_tokens: expected an integer, got 1e3`},
		{"a nested integer", "verifier", "verifiers:\n  - name: v\n    command: [cat]\n    limits: {procs: 4.5}\ncomponents:\n  - {name: a, expr: '1.0'}\n", &VerifierConfig{},
			`spec.yaml:4:14: verifier "v": limits.procs: expected an integer, got 4.5`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := decode("spec.yaml", c.kind, parse(t, c.src), c.into); err == nil || err.Error() != c.want {
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

// TestRunnerKeyErrors: a verifier's or judge's bad key is reported as a
// pipeline file's is — the spec file, the key's own line and column, the
// runner, the key, and a "did you mean" — and limits a sandbox would
// refuse on every row fail the compile, not every row at run time (where
// a negative memory_mb made every row an error and rewards check exit 0).
func TestRunnerKeyErrors(t *testing.T) {
	const verifierSpec = "components:\n  - {name: a, expr: '1.0'}\nverifiers:\n  - name: v\n    command: [cat]\n    expected_stdout: ok\n    KEYS\n"
	for _, c := range []struct{ name, keys, want string }{
		{"an unknown key", "comand: [cat]",
			`spec.yaml:7:5: verifier "v": unknown key "comand" (did you mean "command"?)`},
		{"an unknown nested key", "limits: {wal: 5s}",
			`spec.yaml:7:14: verifier "v": unknown key "wal" in limits (did you mean "wall"?)`},
		{"a key far from any", "limits: {disk_mb: 5}",
			`spec.yaml:7:14: verifier "v": unknown key "disk_mb" in limits (known keys: cpu_time, file_mb, memory_mb, output_kb, procs, wall)`},
		{"a duration without a unit", "limits:\n      wall: 10",
			`spec.yaml:8:7: verifier "v": limits.wall: 10 is not a duration (write a Go duration such as "200ms", "2s" or "5m")`},
		{"a duration that does not parse", "limits: {cpu_time: 5 seconds}",
			`spec.yaml:7:14: verifier "v": limits.cpu_time: "5 seconds" is not a duration (write a Go duration such as "200ms", "2s" or "5m")`},
		{"a negative memory limit", "limits: {memory_mb: -1}",
			`spec.yaml:7:14: verifier "v": limits.memory_mb: must not be negative, got -1 (give a positive limit, or leave it out for the sandbox's default)`},
		{"a negative wall time", "limits: {wall: -2s}",
			`spec.yaml:7:14: verifier "v": limits.wall: must not be negative, got -2s (give a positive limit, or leave it out for the sandbox's default)`},
		{"a memory limit that overflows in bytes", "limits: {memory_mb: 9223372036854775807}",
			`spec.yaml:7:14: verifier "v": limits.memory_mb: 9223372036854775807 is too large (at most 8796093022207) (give a smaller limit, or leave it out for the sandbox's default)`},
		{"two problems at once", "limits: {procs: -3, output_kb: -4}",
			"spec.yaml:7:14: verifier \"v\": limits.procs: must not be negative, got -3 (give a positive limit, or leave it out for the sandbox's default)\n" +
				`spec.yaml:7:25: verifier "v": limits.output_kb: must not be negative, got -4 (give a positive limit, or leave it out for the sandbox's default)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec, err := rewards.ParseSpec("spec.yaml", []byte(strings.Replace(verifierSpec, "KEYS", c.keys, 1)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Compile(spec)
			if err == nil || err.Error() != c.want {
				t.Fatalf("Compile = %v\nwant      %s", err, c.want)
			}
			if !errors.Is(err, rewards.ErrSpec) {
				t.Errorf("%v is not a rewards.ErrSpec", err)
			}
		})
	}
	t.Run("a judge's duration", func(t *testing.T) {
		const src = "components:\n  - {name: a, expr: '1.0'}\njudges:\n  - name: j\n    base_url: http://127.0.0.1:9/v1\n    model: m\n    rubric: r\n    timeout: soon\n"
		spec, err := rewards.ParseSpec("spec.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		const want = `spec.yaml:8:5: judge "j": timeout: "soon" is not a duration (write a Go duration such as "200ms", "2s" or "5m")`
		if _, err := Compile(spec); err == nil || err.Error() != want {
			t.Fatalf("Compile = %v\nwant      %s", err, want)
		}
	})
}

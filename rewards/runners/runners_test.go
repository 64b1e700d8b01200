package runners_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/rewardstest"
	"github.com/rlpipe/rlpipe/rewards/runners"
	"github.com/rlpipe/rlpipe/sandbox"
)

// verifierSpec is the safe shape, the very example of docs/REWARDS.md
// ("Verifiers that cannot be gamed"): the harness runs the solution in a
// child of its own and prints what it returns; the checker, in a sandbox
// of its own after the candidate has exited, compares that with the
// expected answers and writes its verdict to $RLPIPE_VERDICT.
var verifierSpec = docsExample() + `components:
  - name: passes
    expr: 'verifiers.tests.passed ? 1.0 : 0.0'
    weight: 1.0
  - name: slow
    expr: 'verifiers.tests.timed_out ? -1.0 : 0.0'
    weight: 1.0
`

// docsExample returns the first yaml block under "Verifiers that cannot be
// gamed" in docs/REWARDS.md.
func docsExample() string { return docsBlock("## Verifiers that cannot be gamed") }

// docsBlock returns the first yaml block under heading in
// docs/REWARDS.md.
func docsBlock(heading string) string {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "REWARDS.md"))
	if err != nil {
		panic(err)
	}
	_, section, ok := strings.Cut(string(b), heading+"\n")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		panic("docs/REWARDS.md: no yaml block under " + heading)
	}
	return block
}

// expectedSpec compares the run's output with the answer itself: the
// expected text never enters a sandbox.
const expectedSpec = `verifiers:
  - name: out
    files:
      solution.py: "{{.Code}}"
    command: [python3, solution.py]
    expected_stdout: "{{.Answer}}"
components:
  - name: passes
    expr: 'verifiers.out.passed ? 1.0 : 0.0'
`

func compile(t *testing.T, text string) *rewards.Program {
	t.Helper()
	if err := sandbox.Available(); err != nil {
		t.Fatalf("the sandbox is needed: %v", err)
	}
	return rewardstest.Program(t, "spec.yaml", text)
}

type scored struct {
	total  float64
	result rewards.VerifierResult
}

func score(t *testing.T, prog *rewards.Program, verifier, completion, answer string) scored {
	t.Helper()
	row := rewards.Row{Trajectory: tables.Trajectory{PromptID: "p", Completion: completion, Status: tables.StatusOK},
		Prompt: tables.Prompt{PromptID: "p", Answer: answer}, HasPrompt: true}
	r, err := prog.Score(context.Background(), row, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != tables.StatusOK {
		t.Fatalf("row status %q: %v", r.Status, r.Error)
	}
	var outs map[string]rewards.VerifierResult
	if err := json.Unmarshal([]byte(r.VerifierOutputs), &outs); err != nil {
		t.Fatalf("verifier outputs %q: %v", r.VerifierOutputs, err)
	}
	return scored{r.Total, outs[verifier]}
}

func TestVerifierInSandbox(t *testing.T) {
	prog := compile(t, verifierSpec)
	cases := []struct {
		name, completion string
		want             float64
		status           string
	}{
		{"right", "Here:\n```python\ndef add(a, b):\n    return a + b\n```", 1, "ok"},
		{"wrong", "```python\ndef add(a, b):\n    return a - b\n```", 0, "failed"},
		{"loops forever", "```python\ndef add(a, b):\n    while True: pass\n```", -1, "timeout"},
		{"tries the network", "```python\nimport socket\nsocket.create_connection(('1.1.1.1', 80), timeout=1)\ndef add(a, b):\n    return a + b\n```", 0, "failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := score(t, prog, "tests", c.completion, "")
			if got.total != c.want || got.result.Status != c.status {
				t.Fatalf("total %v, verifier %+v; want %v, status %s", got.total, got.result, c.want, c.status)
			}
		})
	}
}

// TestRewardHacks plays the three known hacks of a code verifier against
// the safe shapes: each scores 0, with a status (and reason) naming the
// attempt where it shows.
func TestRewardHacks(t *testing.T) {
	checked := compile(t, verifierSpec)
	compared := compile(t, expectedSpec)
	for _, c := range []struct {
		name       string
		prog       *rewards.Program
		verifier   string
		completion string
		status     string
		reason     string
	}{
		{"os._exit(0) at import of the solution", checked, "tests",
			"```python\nimport os\nos._exit(0)\n```", "failed", "the solution did not return its results (it exited 0)"},
		{"os._exit(0) instead of printing the answer", compared, "out",
			"```python\nimport os\nos._exit(0)\n```", "failed", "not the expected output"},
		{"rewriting the harness and running it", checked, "tests",
			"```python\nimport subprocess, sys\n" +
				"open('/harness/run.py', 'w').write('print(\"[5, 0]\")\\nprint(\"harness: done\")\\n')\n" +
				"def add(a, b):\n    return 0\n```", "tampered", "/harness/run.py"},
		{"rewriting check.py and running it", checked, "tests",
			"```python\nimport subprocess, sys\n" +
				"open('/check/check.py', 'w').write('import sys; sys.exit(0)')\n" +
				"subprocess.run([sys.executable, '/check/check.py'], check=True)\n```", "tampered", "/check/check.py"},
		{"a check.py of its own in the workspace", checked, "tests",
			"```python\nimport os, subprocess, sys\n" +
				"open('check.py', 'w').write('pass')\nsubprocess.run([sys.executable, 'check.py'], check=True)\nos._exit(0)\n```",
			"failed", "the solution did not return its results (it exited 0)"},
		{"rewriting expected.json", checked, "tests",
			"```python\nopen('/check/expected.json', 'w').write('[0, 0]')\ndef add(a, b):\n    return 0\n```", "tampered", "/check/expected.json"},
		{"printing the harness's output and sentinel, then os._exit(0)", checked, "tests",
			"```python\nimport os, sys\nprint('[5, 0]')\nprint('harness: done')\nsys.stdout.flush()\nos._exit(0)\n```",
			"failed", "the solution did not return its results (it exited 0)"},
		{"writing the sentinel to every process's stdout", checked, "tests",
			"```python\nimport os\nfor pid in os.listdir('/proc'):\n" +
				"    for fd in ('1', '2'):\n" +
				"        try:\n            with open('/proc/%s/fd/%s' % (pid, fd), 'w') as f: f.write('[5, 0]\\nharness: done\\n')\n" +
				"        except OSError as e: print(pid, fd, e)\n" +
				"os._exit(0)\n```",
			"failed", "the solution did not return its results (it exited 0)"},
		{"an expected.txt of its own", compared, "out",
			"```python\nopen('expected.txt', 'w').write('7')\nprint(open('expected.txt').read())\n```", "failed", "not the expected output"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := score(t, c.prog, c.verifier, c.completion, "42")
			if got.total != 0 || got.result.Passed || got.result.Status != c.status || !strings.Contains(got.result.Reason, c.reason) {
				t.Fatalf("total %v, verifier %+v; want 0, status %s, a reason naming %q", got.total, got.result, c.status, c.reason)
			}
		})
	}
	t.Run("the honest answer still passes", func(t *testing.T) {
		if got := score(t, compared, "out", "```python\nprint(6 * 7)\n```", "42"); got.total != 1 {
			t.Fatalf("total %v, verifier %+v; want 1", got.total, got.result)
		}
	})
}

// The unsafe shape of older specs — a checker beside the solution, the
// exit code as the verdict — is refused with the field and the safe
// alternative, unless verdict: exit_code keeps it knowingly.
func TestUnsafeVerifierRefused(t *testing.T) {
	const unsafe = `verifiers:
  - name: tests
    command: [python3, check.py]
    files:
      solution.py: "{{.Code}}"
      check.py: |
        from solution import add
        assert add(2, 3) == 5
components:
  - name: passes
    expr: 'verifiers.tests.passed ? 1.0 : 0.0'
`
	spec, err := rewards.ParseSpec("spec.yaml", []byte(unsafe))
	if err != nil {
		t.Fatal(err)
	}
	_, err = runners.Compile(spec)
	for _, want := range []string{`spec.yaml:2:5: verifier "tests": `, "files: check.py, solution.py", "os._exit(0)", "check:", "expected_stdout", "verdict: exit_code"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Compile = %v; want an error naming %q", err, want)
		}
	}
	kept := strings.Replace(unsafe, "    command:", "    verdict: exit_code\n    command:", 1)
	prog := compile(t, kept)
	// What verdict: exit_code gives up: the hack passes.
	if got := score(t, prog, "tests", "```python\nimport os\nos._exit(0)\n```", ""); got.total != 1 {
		t.Fatalf("with verdict: exit_code, total %v; the exit code decides", got.total)
	}
}

func TestBadVerifierConfig(t *testing.T) {
	for _, c := range []struct{ name, from, to, want string }{
		{"unknown key", "command:", "comand:", `verifier "tests"`},
		{"no check command", "      command: [python3, /check/check.py]\n", "", "check: command is required"},
		{"check and expected_stdout", "    check:", "    expected_stdout: x\n    check:", "give one"},
		{"pass_exit_code without verdict: exit_code", "    check:", "    pass_exit_code: 1\n    check:", "pass_exit_code"},
		{"unknown verdict", "    check:", "    verdict: stdout\n    check:", `"stdout" is not a verdict`},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec, err := rewards.ParseSpec("spec.yaml", []byte(strings.Replace(verifierSpec, c.from, c.to, 1)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := runners.Compile(spec); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Compile = %v, want an error naming %q", err, c.want)
			}
		})
	}
}

package runners_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/runners"
	"github.com/rlpipe/rlpipe/sandbox"
)

const verifierSpec = `verifiers:
  - name: tests
    command: [python3, check.py]
    files:
      solution.py: "{{.Code}}"
      check.py: |
        from solution import add
        assert add(2, 3) == 5
        print("all good")
    limits: {cpu_time: 2s, wall: 10s}
components:
  - name: passes
    expr: 'verifiers.tests.passed ? 1.0 : 0.0'
    weight: 1.0
  - name: slow
    expr: 'verifiers.tests.timed_out ? -1.0 : 0.0'
    weight: 1.0
`

func TestVerifierInSandbox(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		t.Fatalf("the sandbox is needed: %v", err)
	}
	spec, err := rewards.ParseSpec("spec.yaml", []byte(verifierSpec))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := runners.Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, completion string
		want             float64
	}{
		{"right", "Here:\n```python\ndef add(a, b):\n    return a + b\n```", 1},
		{"wrong", "```python\ndef add(a, b):\n    return a - b\n```", 0},
		{"loops forever", "```python\ndef add(a, b):\n    while True: pass\n```", -1},
		{"tries the network", "```python\nimport socket\nsocket.create_connection(('1.1.1.1', 80), timeout=1)\ndef add(a, b):\n    return a + b\n```", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			row := rewards.Row{Trajectory: tables.Trajectory{PromptID: "p", Completion: c.completion, Status: tables.StatusOK}}
			r, err := prog.Score(context.Background(), row, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Total != c.want || r.Status != tables.StatusOK {
				t.Fatalf("total %v status %q (%v, verifier %s), want %v", r.Total, r.Status, r.Error, r.VerifierOutputs, c.want)
			}
		})
	}
}

func TestBadRunnerConfig(t *testing.T) {
	spec, err := rewards.ParseSpec("spec.yaml", []byte(strings.Replace(verifierSpec, "command:", "comand:", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runners.Compile(spec); err == nil || !strings.Contains(err.Error(), `verifier "tests"`) {
		t.Fatalf("unknown key: %v", err)
	}
}

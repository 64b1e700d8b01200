package runners_test

import (
	"fmt"

	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/runners"
)

// Compile is the check a command runs before any work, and the program
// it then scores with: a verifier's config and the expressions are
// checked together, once.
func ExampleCompile() {
	spec, err := rewards.ParseSpec("reward.yaml", []byte(`verifiers:
  - name: tests
    files: {check.py: "assert True"}
components:
  - name: passes
    expr: 'verifiers.tests.passed ? 1.0 : 0.0'
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = runners.Compile(spec)
	fmt.Println(err)
	// Output: reward.yaml:2:5: verifier "tests": command is required
}

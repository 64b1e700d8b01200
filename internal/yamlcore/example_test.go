package yamlcore_test

import (
	"fmt"

	"github.com/rlpipe/rlpipe/internal/yamlcore"
)

func ExampleUnmarshal() {
	var hp map[string]any
	if err := yamlcore.Unmarshal([]byte("{learning_rate: 1e-6, warmup: .1, name: '1e3'}"), &hp); err != nil {
		panic(err)
	}
	for _, k := range []string{"learning_rate", "warmup", "name"} {
		fmt.Printf("%s: %v (%T)\n", k, hp[k], hp[k])
	}
	// Output:
	// learning_rate: 1e-06 (float64)
	// warmup: 0.1 (float64)
	// name: 1e3 (string)
}

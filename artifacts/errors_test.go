package artifacts_test

import (
	"errors"
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts"
)

// A package names the leaves of its error hierarchy with NamedError; a
// caller matches the leaf or any error above it.
func ExampleNamedError() {
	errTooLong := artifacts.NamedError("prompt too long", artifacts.ErrInvalid)
	err := fmt.Errorf("read prompts.parquet row 3: %w", errTooLong)
	fmt.Println(err)
	fmt.Println(errors.Is(err, errTooLong), errors.Is(err, artifacts.ErrInvalid), errors.Is(err, artifacts.ErrNotFound))
	// Output:
	// read prompts.parquet row 3: prompt too long
	// true true false
}

package config_test

import (
	"errors"
	"os"
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
)

// FuzzParse checks that the parser never panics, that every error is a
// config error, and that an accepted config plans and records.
func FuzzParse(f *testing.F) {
	f.Add([]byte(base))
	for _, p := range []string{"../../examples/standin/pipeline.yaml", "testdata/command.yaml"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("stages: {sample: &a {kind: standin}, generate: *a}\n"))
	f.Add([]byte("environments: {x: {<<: {timeout: 1s}}}\n"))
	f.Add([]byte("iterations: !!str 3\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Parse("f.yaml", data, kinds.Registry())
		if err != nil {
			if !errors.Is(err, pipeline.ErrConfig) {
				t.Fatalf("error is not a config error: %v", err)
			}
			return
		}
		if _, err := c.Plan(); err != nil {
			t.Fatalf("an accepted config does not plan: %v", err)
		}
		if _, err := c.YAML(); err != nil {
			t.Fatalf("an accepted config does not encode: %v", err)
		}
	})
}

package policytest_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/policy/policytest"
	"github.com/rlpipe/rlpipe/policy/server"
	"github.com/rlpipe/rlpipe/policy/server/servertest"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// A backend's package runs the suite from a test of its own; here the
// embedded model behind a policy server on loopback, through the OpenAI
// client (policy/tiny's TestConformance runs it in process too, with an
// adapter and golden samples).
func ExampleRun() {
	_ = func(t *testing.T) { // func TestConformance(t *testing.T)
		policytest.Run(t, func(t *testing.T) policytest.Backend {
			m, err := tiny.Embedded()
			if err != nil {
				t.Fatal(err)
			}
			c, _ := servertest.Loopback(t, tiny.NewPolicy(m), &server.Options{Model: m.Version()}, nil)
			return policytest.Backend{Policy: c, Prompts: []string{"123+456=", "77+642="}, MaxTokens: 6,
				Invalid: "12+x=", Version: m.Version()}
		})
	}
}

package config_test

// Plan opens the policy a config names through policy.Open: the tests
// register the backends the CLI registers.
import (
	_ "github.com/rlpipe/rlpipe/policy/embedded"
	_ "github.com/rlpipe/rlpipe/policy/openai"
)

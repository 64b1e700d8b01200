package cli

// The store backends the command can open, registered by URI scheme: the
// embedded store for plain paths ("file"), lakeFS for lakefs://REPO. And
// the policy backends a pipeline's policy section can name, registered by
// kind: the embedded model, and servers of the OpenAI API.
import (
	_ "github.com/rlpipe/rlpipe/artifacts/lakefs"
	_ "github.com/rlpipe/rlpipe/artifacts/local"
	_ "github.com/rlpipe/rlpipe/policy/embedded"
	_ "github.com/rlpipe/rlpipe/policy/openai"
)

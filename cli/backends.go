package cli

// The store backends the command can open, registered by URI scheme: the
// embedded store for plain paths ("file"), lakeFS for lakefs://REPO. The
// stage kinds and policy backends a pipeline can name are in cli/kinds.
import (
	_ "github.com/rlpipe/rlpipe/artifacts/lakefs"
	_ "github.com/rlpipe/rlpipe/artifacts/local"
)

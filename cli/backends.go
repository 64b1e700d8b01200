package cli

// The store backends the command can open, registered by URI scheme: the
// embedded store for plain paths ("file"), lakeFS for lakefs://REPO.
import (
	_ "github.com/rlpipe/rlpipe/artifacts/lakefs"
	_ "github.com/rlpipe/rlpipe/artifacts/local"
)

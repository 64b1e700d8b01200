package cli

// The store backends the command can open, registered by URI scheme: the
// embedded store for plain paths ("file").
import (
	_ "github.com/rlpipe/rlpipe/artifacts/local"
)

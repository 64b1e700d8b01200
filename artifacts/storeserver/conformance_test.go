package storeserver_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
)

// TestConformance runs the shared suite against the lakefs:// backend
// talking to a Server on a loopback socket over a fresh embedded store:
// every behaviour a pipeline sees directly it must see through the server.
//
// The GC scenarios skip themselves: the lakefs:// backend does not
// implement artifacts.Collector (lakeFS collects garbage on its own; see
// artifacts/lakefs/doc.go, "Not supported"), so collection through the
// server is not offered; run `rlpipe gc` where the store lives.
func TestConformance(t *testing.T) {
	artifactstest.Run(t, func(t *testing.T) artifacts.Store {
		_, _, st := served(t)
		return st
	})
}

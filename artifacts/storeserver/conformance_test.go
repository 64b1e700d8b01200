package storeserver_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
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

// TestConformanceWithMD5Checksums runs the shared suite against a server
// that reports checksums as lakeFS's local block store does (the MD5 of
// the content): what a pipeline sees through a real lakeFS, whose
// checksums are not the embedded store's, must keep the contract too.
func TestConformanceWithMD5Checksums(t *testing.T) {
	artifactstest.Run(t, func(t *testing.T) artifacts.Store {
		url := serve(t, newLocal(t), &storeserver.Options{AccessKeyID: testKey, SecretAccessKey: testSecret,
			Faults: storeserver.Faults{MD5Checksums: true}})
		return open(t, url, testKey, testSecret)
	})
}

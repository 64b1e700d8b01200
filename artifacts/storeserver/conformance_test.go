package storeserver_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
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

// TestConformanceThroughPresignedTransfers runs the shared suite's
// scenarios of objects and staging with every object of more than 1 byte
// put and read whole through presigned URLs to a block store
// (storeserver.BlockStore): the presigned path must keep the contract the
// API path keeps. Objects/Sizes is left out for time (it reads 4 MiB
// objects a byte at a time, through the same reader either way); the
// other groups put and read objects as these do.
func TestConformanceThroughPresignedTransfers(t *testing.T) {
	artifactstest.RunSome(t, func(t *testing.T) artifacts.Store {
		bs := artifactstest.ServeBlockStore(t, storeserver.BlockStoreOptions{})
		url := serve(t, newLocal(t), &storeserver.Options{AccessKeyID: testKey, SecretAccessKey: testSecret, BlockStore: bs})
		return artifactstest.OpenLakeFSWith(t, lakefs.Config{Endpoint: url, AccessKeyID: testKey, SecretAccessKey: testSecret, PresignThreshold: 1}, testRepo, nil)
	}, func(group, scenario string) bool {
		return (group == "Objects" || group == "Staging") && scenario != "Sizes"
	})
}

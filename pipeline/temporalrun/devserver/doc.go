// Package devserver runs a single-process Temporal server for trying
// rlpipe's Temporal executor on one machine: `rlpipe temporal dev`.
//
// It is Temporal's own server (go.temporal.io/server, the module rlpipe's
// Temporal tests already start in-process) with its four services in this
// process, SQLite for persistence — in memory, or in one file that keeps
// runs across restarts — and the namespace the workers use registered at
// start. It listens on loopback only: the dev server has no
// authentication, so a server other hosts reach is a real cluster (see
// docs/DEPLOY.md).
//
//	srv, err := devserver.Start(devserver.Options{Address: "127.0.0.1:7233"})
//	...
//	defer srv.Stop()
//	fmt.Println(srv.Address())
package devserver

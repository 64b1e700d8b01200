// Package openenv benchmarks rlpipe's OpenEnv client (environments/openenv)
// against the peer it replaces: BenchmarkOpenEnvGoVsPython drives the
// same episodes (reset, a wrong answer, the right one) on the same server
// (examples/openenv's arith_env, served from the real openenv package)
// through the Go WebSocket client and through a Python client on the
// websockets package (testdata/pyclient.py, the loop OpenEnv's own
// clients run), one socket each, and reports episodes/s of both and
// go/python (target ≥ 0.8). Skipped without the openenv venv.
package openenv

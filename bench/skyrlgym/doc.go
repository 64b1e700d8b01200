// Package skyrlgym benchmarks episodes/s of SkyRL-gym's gsm8k through
// rlpipe's skyrl_gym environment (environments/skyrlgym: the Go side
// drives the worker, many episodes in flight on its pipe) against the
// same episodes driven from Python over the same JSON-lines pipe to the
// same worker script (testdata/client.py, a window of episodes' requests
// written together): the floor, since in-process Python pays no pipe.
// Skipped without the project venv.
package skyrlgym

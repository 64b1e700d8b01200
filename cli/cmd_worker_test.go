package cli

import (
	"strings"
	"testing"
)

// TestWorkerAndTemporalRunBadInput checks the mistakes `rlpipe worker`
// and `rlpipe run --executor temporal` catch before reaching Temporal,
// and an unreachable server: each a clear error naming the fix.
func TestWorkerAndTemporalRunBadInput(t *testing.T) {
	h := newHarness(t)
	cfg := "../examples/standin/pipeline.yaml"
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"embedded store", []string{"--store", h.store, "run", "-f", cfg, "--executor", "temporal"}, ExitUsage,
			"is an embedded store, which one process opens at a time; workers on Temporal need a store they all reach: serve it with `rlpipe --store " + h.store + " store serve`"},
		{"unknown executor", []string{"--store", h.store, "run", "-f", cfg, "--executor", "k8s"}, ExitUsage,
			`run: --executor "k8s": use local or temporal`},
		{"worker on the embedded store", []string{"--store", h.store, "worker", "-f", cfg, "--env", "generate"}, ExitUsage,
			"is an embedded store, which one process opens at a time"},
		{"no environment", []string{"--store", "lakefs://rl", "worker", "-f", cfg}, ExitUsage,
			"worker: name the environments to serve with --env NAME (or --driver to run loops, or --scale ENV=MIN:MAX to run worker processes that follow the work)"},
		{"scale with env", []string{"--store", "lakefs://rl", "worker", "-f", cfg, "--env", "generate", "--scale", "generate=0:2"}, ExitUsage,
			"worker: --scale runs worker processes of the environments it names; give it without --env and --driver (serve the driver from another `rlpipe worker --driver`)"},
		{"scale with driver", []string{"--store", "lakefs://rl", "worker", "-f", cfg, "--driver", "--scale", "generate=0:2"}, ExitUsage,
			"worker: --scale runs worker processes of the environments it names; give it without --env and --driver"},
		{"scale min above max", []string{"--store", "lakefs://rl", "worker", "-f", cfg, "--scale", "generate=4:1"}, ExitUsage,
			`worker: --scale: bad scale "generate=4:1": need 0 <= MIN <= MAX and MAX >= 1`},
		{"scale without a range", []string{"--store", "lakefs://rl", "worker", "-f", cfg, "--scale", "generate"}, ExitUsage,
			`worker: --scale: bad scale "generate": write ENV=MIN:MAX, e.g. generate=0:4`},
		{"scale unknown environment", []string{"--store", "lakefs://rl", "worker", "-f", cfg, "--scale", "train=0:1,gpu=0:2"}, ExitUsage,
			"worker: --scale gpu: no task of ../examples/standin/pipeline.yaml runs in it (its environments: default, generate, health, reward, sample, train)"},
		{"scale idle zero", []string{"--store", "lakefs://rl", "worker", "-f", cfg, "--scale", "train=0:1", "--scale-idle", "0s"}, ExitUsage,
			"worker: --scale-poll 1s and --scale-idle 0s: use positive durations, e.g. --scale-poll 1s --scale-idle 30s"},
		{"scale no server", []string{"--store", "lakefs://rl", "worker", "-f", cfg, "--scale", "train=0:1", "--temporal", "127.0.0.1:1"}, ExitFailure,
			"rlpipe: cannot reach Temporal at 127.0.0.1:1 (namespace default): "},
		{"unknown environment", []string{"--store", "lakefs://rl", "worker", "-f", cfg, "--env", "gpu"}, ExitUsage,
			`worker: --env "gpu": no task of ../examples/standin/pipeline.yaml runs in it (its environments: default, generate, health, reward, sample, train)`},
		{"negative GPUs", []string{"--store", "lakefs://rl", "worker", "-f", cfg, "--env", "train", "--gpus", "-3"}, ExitUsage,
			"worker: --gpus -3: use 0 or more (the GPUs this host hands to tasks)"},
		{"tiny heartbeat", []string{"--store", "lakefs://rl", "run", "-f", cfg, "--executor", "temporal", "--heartbeat", "10ms"}, ExitUsage,
			"--heartbeat 10ms: use at least 1s"},
		{"no server", []string{"--store", "lakefs://rl", "worker", "-f", cfg, "--env", "generate", "--temporal", "127.0.0.1:1"}, ExitFailure,
			"cannot reach Temporal at 127.0.0.1:1 (namespace default): failed reaching server: connection error: desc = \"transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused\"\nhint: start a dev server on this machine with `rlpipe temporal dev` (or Temporal's `temporal server start-dev`), or pass --temporal HOST:PORT (env TEMPORAL_ADDRESS)"},
		{"no server for run", []string{"--store", "lakefs://rl", "run", "-f", cfg, "--executor", "temporal", "--temporal", "127.0.0.1:1", "--namespace", "rl"}, ExitFailure,
			"rlpipe: cannot reach Temporal at 127.0.0.1:1 (namespace rl): "},
		{"temporal dev in a build without it", []string{"temporal", "dev"}, ExitFailure,
			"rlpipe: temporal dev: this program was built without Temporal's dev server; run the rlpipe command (go build ./cli/rlpipe), or Temporal's CLI: temporal server start-dev\n"},
	} {
		r := h.runRaw(tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant exit %d and %q", tc.name, r.code, r.stderr, tc.code, tc.want)
		}
	}
}

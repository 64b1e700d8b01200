package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/internal/testproc"
)

// envCLIArgs makes the test binary act as the rlpipe command: its value is
// the argument list as JSON. The kill test runs `rlpipe run` this way in a
// child process it can SIGKILL.
const envCLIArgs = "RLPIPE_TEST_CLI_ARGS"

func TestMain(m *testing.M) {
	if raw := os.Getenv(envCLIArgs); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(run(context.Background(), args, environ{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}))
	}
	os.Exit(m.Run())
}

// startCLI starts this test binary as `rlpipe ARGS` (args: the JSON
// argument list) in a child process that a test can SIGKILL; done gets
// its Wait result, stderr what it wrote there.
func startCLI(t *testing.T, args []byte) (cmd *exec.Cmd, stderr *bytes.Buffer, done chan error) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envCLIArgs+"="+string(args))
	stderr = &bytes.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done = make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, stderr, done
}

// runKilled runs `rlpipe ARGS` in a child process, SIGKILLs it three
// times at random moments (from minMS to minMS+spanMS after each start),
// then lets it finish; it fails the test if the last leg fails, and
// returns the kills.
func runKilled(t *testing.T, rng *rand.Rand, minMS, spanMS int, args ...string) int {
	t.Helper()
	return runLegs(t, 30, 3, func(done chan error) bool {
		select {
		case err := <-done:
			done <- err
			return false
		case <-time.After(time.Duration(minMS+rng.IntN(spanMS)) * time.Millisecond):
			return true
		}
	}, args...)
}

// runLegs runs `rlpipe ARGS` in a child process again and again until a
// leg finishes: while fewer than kills legs were killed, killNow waits
// for the moment to SIGKILL the leg and says true, or says false when
// the leg ended first, leaving its result in done. It fails the test if
// the leg that finishes fails or none does after maxLegs, and returns the
// kills.
func runLegs(t *testing.T, maxLegs, kills int, killNow func(done chan error) bool, args ...string) int {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for leg := 0; ; leg++ {
		if leg > maxLegs {
			t.Fatalf("the run did not finish after %d legs", leg)
		}
		cmd, stderr, done := startCLI(t, raw)
		if killed < kills && killNow(done) {
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			killed++
			continue
		}
		if err := <-done; err != nil {
			t.Fatalf("leg %d: %v\n%s", leg, err, stderr.String())
		}
		return killed
	}
}

// sameAsUninterrupted fails t for each artifact of got (runSums after the
// killed legs) that differs from want (an uninterrupted run's), and logs
// the outcome; what names the case in the messages.
func sameAsUninterrupted(t *testing.T, what string, kills int, want, got map[string]string) {
	t.Helper()
	for p, s := range want {
		if got[p] != s {
			t.Errorf("%safter %d kills: %s differs (%s, want %s)", what, kills, p, got[p], s)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s%d artifacts, want %d", what, len(got), len(want))
	}
	t.Logf("%s%d kills, %d artifacts identical to the uninterrupted run", what, kills, len(want))
}

// runSums maps the run's artifacts (iterations/, evals/, run/state) to
// their checksums: events/ holds timings and is left out.
func runSums(t *testing.T, store, branch string) map[string]string {
	t.Helper()
	st, err := local.Open(context.Background(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return artifactstest.Sums(t, st, branch, "iterations/", "evals/", "run/state")
}

// killedRunMatches runs `rlpipe run --no-report` of the pipeline setup
// makes (a fresh store and its config file) twice: once uninterrupted,
// whose branch must hold at least minArtifacts, then SIGKILLed at random
// moments (runKilled with rng, minMS and spanMS) until it finishes; every
// artifact the killed run leaves on branch must equal the uninterrupted
// run's.
func killedRunMatches(t *testing.T, setup func() (*harness, string), branch string, minArtifacts int, rng *rand.Rand, minMS, spanMS int) {
	t.Helper()
	ref, refCfg := setup()
	ref.ok("run", "-f", refCfg, "--no-report")
	want := runSums(t, ref.store, branch)
	if len(want) < minArtifacts {
		t.Fatalf("the reference run holds %d artifacts", len(want))
	}
	h, cfg := setup()
	kills := runKilled(t, rng, minMS, spanMS, "--store", h.store, "--log-level", "error", "run", "-f", cfg, "--no-report")
	sameAsUninterrupted(t, "", kills, want, runSums(t, h.store, branch))
}

// TestKillTrainingAndResume SIGKILLs `rlpipe run` of the arithmetic GRPO
// loop at random moments (training is about half of each iteration) and
// runs it again until it finishes: every artifact — trajectories,
// rewards, adapters with their optimizer state, evaluations, the loop
// state — must equal an uninterrupted run's, byte for byte.
func TestKillTrainingAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the GRPO loop several times")
	}
	trials := testproc.ChaosTrials(t, 1)
	ref, cfg := smallArithRun(t)
	src := strings.Replace(readFile(t, cfg), "iterations: 4", "iterations: 10", 1)
	refCfg := ref.file("long.yaml", src)
	ref.ok("run", "-f", refCfg)
	want := runSums(t, ref.store, "runs-arith")
	if len(want) < 40 {
		t.Fatalf("the reference run holds %d artifacts", len(want))
	}
	rng := rand.New(rand.NewPCG(11, uint64(trials)))
	for trial := 0; trial < trials; trial++ {
		h := newStore(t)
		h.ok("dataset", "arith", "main", "--train", "256", "--heldout", "50")
		chaosCfg := h.file("pipeline.yaml", src)
		kills := runKilled(t, rng, 300, 1500, "--store", h.store, "--log-level", "error", "run", "-f", chaosCfg)
		sameAsUninterrupted(t, fmt.Sprintf("trial %d: ", trial), kills, want, runSums(t, h.store, "runs-arith"))
	}
}

// TestKillEpisodesAndResume does the same to a loop of multi-turn
// episodes (the chain environment, trained with grpo on their masks, its
// checkpoints evaluated on episodes): every table, adapter and evaluation
// equals an uninterrupted run's, byte for byte.
func TestKillEpisodesAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the episodes loop several times")
	}
	src := strings.Replace(chainPipeline, "iterations: 2", "iterations: 10", 1)
	setup := func() (*harness, string) {
		h := newStore(t)
		h.ok("dataset", "arith", "main", "--train", "64", "--heldout", "10")
		h.file("chain-reward.yaml", chainReward)
		return h, h.file("chain.yaml", src)
	}
	killedRunMatches(t, setup, "runs-chain", 40, rand.New(rand.NewPCG(5, 18)), 200, 1200)
}

package temporaltests_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/server/temporaltest"

	"github.com/rlpipe/rlpipe/artifacts"
	_ "github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun"
)

// rlpipeBin is the rlpipe command, built once for the process tests.
var rlpipeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rlpipe-temporal-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rlpipeBin = filepath.Join(dir, "rlpipe")
	build := exec.Command("go", "build", "-o", rlpipeBin, "github.com/rlpipe/rlpipe/cli/rlpipe")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build rlpipe:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a child rlpipe process; its output is kept for assertions.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr standintest.LogBuffer
	exited         chan struct{} // closed when the process exited
	err            error         // its exit error, once exited
}

func (p *proc) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// wait waits for the process to exit and returns its error.
func (p *proc) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(10 * time.Minute):
		t.Fatalf("%s did not finish; stderr:\n%s", p.name, p.stderr.String())
		return nil
	}
}

// waitOutput waits until the process's stderr or stdout holds all of subs.
func (p *proc) waitOutput(t testing.TB, subs ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		all := p.stderr.String() + p.stdout.String()
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(all, s)
		}
		if ok {
			return
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited (%v) before printing %q; stderr:\n%s", p.name, p.err, subs, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never printed %q; stderr:\n%s", p.name, subs, p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cluster is a Temporal server in this process, an embedded store served
// by `rlpipe store serve`, and rlpipe workers and drivers as processes.
type cluster struct {
	t        testing.TB
	ts       *temporaltest.TestServer
	dir      string
	storeDir string
	env      []string // the store's variables, for every child
	repo     string
	server   *proc
}

func (c *cluster) start(name string, args ...string) *proc {
	c.t.Helper()
	return c.spawn(append(os.Environ(), c.env...), name, args...)
}

// spawn starts rlpipe with args in the cluster's directory and exactly
// the environment env; the test's cleanup kills it.
func (c *cluster) spawn(env []string, name string, args ...string) *proc {
	c.t.Helper()
	p := &proc{name: name, exited: make(chan struct{})}
	p.cmd = exec.Command(rlpipeBin, args...)
	p.cmd.Dir = c.dir
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	c.t.Cleanup(func() {
		p.kill()
		if c.t.Failed() {
			c.t.Logf("%s stderr:\n%s", name, tail(p.stderr.String(), 40))
		}
	})
	return p
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// rlpipe runs a command to completion in dir with extra env and returns
// its stdout.
func rlpipe(t testing.TB, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(rlpipeBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr standintest.LogBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rlpipe %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// newCluster prepares a store with setup (rlpipe commands run on the
// embedded store), serves it, and starts a Temporal server.
func newCluster(t testing.TB, setup func(dir, store string), opts ...temporaltest.TestServerOption) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir()}
	c.storeDir = filepath.Join(c.dir, "store")
	setup(c.dir, c.storeDir)
	c.server = c.start("store serve", "--store", c.storeDir, "store", "serve", "--addr", "127.0.0.1:0", "-o", "json")
	c.server.waitOutput(t, `"store":`)
	var served struct {
		Repository string            `json:"repository"`
		Env        map[string]string `json:"env"`
	}
	if err := json.NewDecoder(strings.NewReader(c.server.stdout.String())).Decode(&served); err != nil {
		t.Fatalf("store serve printed %q: %v", c.server.stdout.String(), err)
	}
	c.repo = served.Repository
	for k, v := range served.Env {
		c.env = append(c.env, k+"="+v)
	}
	c.ts = newTestServer(t, opts...)
	return c
}

// newTestServer starts an in-process Temporal server configured as
// `rlpipe temporal dev`'s (devConfig, unless opts configure it) that
// stops when t ends.
func newTestServer(t testing.TB, opts ...temporaltest.TestServerOption) *temporaltest.TestServer {
	if len(opts) == 0 {
		opts = []temporaltest.TestServerOption{devConfig()}
	}
	if tt, ok := t.(*testing.T); ok {
		return temporaltest.NewServer(append(opts, temporaltest.WithT(tt))...)
	}
	ts := temporaltest.NewServer(opts...)
	t.Cleanup(ts.Stop)
	return ts
}

// temporal are the flags that point a command at the test's server.
func (c *cluster) temporal() []string {
	return []string{"--temporal", c.ts.GetFrontendHostPort(), "--namespace", c.ts.GetDefaultNamespace()}
}

// runArgs are `rlpipe run`'s arguments for cfg on the test's server,
// with a short heartbeat so that lost work moves on quickly.
func (c *cluster) runArgs(cfg string, extra ...string) []string {
	args := append([]string{"run", "-f", cfg, "--executor", "temporal", "--heartbeat", "2s"}, extra...)
	return append(args, c.temporal()...)
}

// worker starts `rlpipe worker` for envs (and the driver with --driver).
func (c *cluster) worker(name, cfg string, extra ...string) *proc {
	args := append([]string{"worker", "-f", cfg, "--log-level", "info"}, extra...)
	p := c.start(name, append(args, c.temporal()...)...)
	p.waitOutput(c.t, "rlpipe worker: serving")
	return p
}

// stopServer stops the store server so the test can open the store.
// runResult waits (up to ten minutes) for the result of run's workflow;
// a workflow that ends without one fails the test, saying when.
func (c *cluster) runResult(t *testing.T, run, when string) json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var raw json.RawMessage
	if err := c.ts.GetDefaultClient().GetWorkflow(ctx, temporalrun.RunID(c.repo, run), "").Get(ctx, &raw); err != nil {
		t.Fatalf("the run workflow did not finish %s: %v", when, err)
	}
	return raw
}

func (c *cluster) stopServer() {
	_ = syscall.Kill(-c.server.cmd.Process.Pid, syscall.SIGTERM)
	<-c.server.exited
}

// storeSums stops the store server and returns a run's artifact sums.
func (c *cluster) storeSums(run string) (map[string]string, []string) {
	c.t.Helper()
	c.stopServer()
	st, err := local.Open(context.Background(), c.storeDir, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	defer st.Close()
	return standintest.Sums(c.t, st, "runs-"+run), events(c.t, st, "runs-"+run)
}

// events returns the run's event lines.
func events(t testing.TB, st artifacts.Store, ref string) []string {
	t.Helper()
	var out []string
	for e, err := range st.ListObjects(context.Background(), ref, &artifacts.ListOptions{Prefix: "events/"}) {
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(standintest.Read(t, st, ref, e.Path))))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			out = append(out, sc.Text())
		}
	}
	return out
}

// localSums runs cfg with the local executor in a fresh store prepared by
// setup and returns the run's artifact sums.
func localSums(t testing.TB, setup func(dir, store string), cfg, run string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	setup(dir, store)
	rlpipe(t, dir, nil, "--store", store, "run", "-f", cfg, "--no-report")
	st, err := local.Open(context.Background(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return standintest.Sums(t, st, "runs-"+run)
}

// standinConfig writes the stand-in example with the generate stage
// sleeping for sleep, and returns its path and a setup that imports its
// prompts.
func standinConfig(t *testing.T, sleep string) (string, func(dir, store string)) {
	t.Helper()
	return editedStandin(t, "generate: {kind: standin, sleep: 1s,", "generate: {kind: standin, sleep: "+sleep+",")
}

// editedStandin writes the stand-in example with each old text of edits
// (old, new, old, new…) replaced once, and returns its path and a setup
// that imports its prompts.
func editedStandin(t testing.TB, edits ...string) (string, func(dir, store string)) {
	t.Helper()
	b, err := os.ReadFile("../../../examples/standin/pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(src, edits[i]) {
			t.Fatalf("the stand-in example has no %q any more: update the test", edits[i])
		}
		src = strings.Replace(src, edits[i], edits[i+1], 1)
	}
	cfg := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	prompts, err := filepath.Abs("../../../examples/standin/prompts.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	setup := func(dir, store string) {
		rlpipe(t, dir, nil, "--store", store, "init-store")
		rlpipe(t, dir, nil, "--store", store, "dataset", "import", prompts, "main:data/prompts.parquet", "--question", "prompt", "--answer", "answer")
	}
	return cfg, setup
}

// runJSON is the part of `rlpipe run -o json` the tests read.
type runJSON struct {
	Iterations    int    `json:"iterations"`
	NewIterations int    `json:"new_iterations"`
	Workflow      string `json:"workflow"`
}

// TestStandinWorkersInProcessesSurviveAKilledWorker runs the stand-in
// pipeline with one worker process per environment and the loop driven
// through Temporal. While a generate attempt runs, its worker is
// SIGKILLed, then a second generate worker starts: the attempt is run
// again there (it does not count as a failure), the run finishes, and
// every artifact equals the local executor's.
//
// The kill comes as soon as the attempt has started, before the second
// worker is started: starting a worker takes seconds on a loaded machine,
// and when it took longer than the attempt's sleep the attempt finished
// before the kill, nothing was lost, and no retry was recorded. With no
// other generate worker up, the lost attempt can only run again on the
// second one.
func TestStandinWorkersInProcessesSurviveAKilledWorker(t *testing.T) {
	c, cfg, want, genA := standinCluster(t, "3s")
	driver := c.start("run", c.runArgs(cfg, "-o", "json")...)
	genA.waitOutput(t, `"task":"generate"`, `"message":"attempt started"`)
	genA.kill()
	if strings.Contains(genA.stderr.String(), `"message":"attempt finished"`) {
		t.Fatalf("the generate attempt finished before its worker was killed (it sleeps 3s); its log:\n%s", tail(genA.stderr.String(), 20))
	}
	genB := c.worker("generate-b", cfg, "--env", "generate")
	if err := driver.wait(t); err != nil {
		t.Fatalf("run: %v\n%s", err, driver.stderr.String())
	}
	var out runJSON
	if err := json.Unmarshal([]byte(driver.stdout.String()), &out); err != nil {
		t.Fatalf("run printed %q: %v", driver.stdout.String(), err)
	}
	if out.Iterations != 6 || out.Workflow != temporalrun.RunID(c.repo, "standin") {
		t.Fatalf("run summary %+v, want 6 iterations of workflow %s", out, temporalrun.RunID(c.repo, "standin"))
	}
	if !strings.Contains(genB.stderr.String(), `"attempt":2`) {
		t.Errorf("the second generate worker never ran the lost attempt again; its log:\n%s", tail(genB.stderr.String(), 20))
	}
	got, evs := c.storeSums("standin")
	sameSums(t, want, got)
	lost := false
	for _, e := range evs {
		lost = lost || strings.Contains(e, `"kind":"task.retried"`) && strings.Contains(e, "lost: its worker stopped heartbeating")
	}
	if !lost {
		t.Errorf("no task.retried event records the lost attempt")
	}
	// Each generate task after the kill finished on the second worker,
	// and its event says so by host and pid.
	host, _ := os.Hostname()
	onB := fmt.Sprintf(`"worker":"%s/%d"`, host, genB.cmd.Process.Pid)
	finished := 0
	for _, e := range evs {
		if strings.Contains(e, `"kind":"task.finished"`) && strings.Contains(e, `"task":"generate"`) {
			finished++
			if !strings.Contains(e, onB) {
				t.Errorf("generate's task.finished event does not name the worker that ran it (%s): %s", onB, e)
			}
		}
	}
	if finished != 6 {
		t.Errorf("%d task.finished events of generate, want 6", finished)
	}
}

// standinCluster is the stand-in pipeline with generate sleeping sleep,
// the artifacts of a local run of it, and a cluster with a worker process
// per environment: genA serves generate.
func standinCluster(t *testing.T, sleep string) (c *cluster, cfg string, want map[string]string, genA *proc) {
	t.Helper()
	cfg, setup := standinConfig(t, sleep)
	want = localSums(t, setup, cfg, "standin")
	c = newCluster(t, setup)
	for _, env := range []string{"sample", "reward", "train", "health"} {
		c.worker(env, cfg, "--env", env)
	}
	return c, cfg, want, c.worker("generate-a", cfg, "--env", "generate")
}

// TestKilledDriverLosesNothing SIGKILLs `rlpipe run --executor temporal`
// (the only driver) after it committed two iterations; a driver worker
// started afterwards takes the loop over and finishes it, with every
// artifact equal to the local executor's. Running the command again
// attaches to the finished run and commits nothing new.
func TestKilledDriverLosesNothing(t *testing.T) {
	cfg, setup := standinConfig(t, "500ms")
	want := localSums(t, setup, cfg, "standin")
	c := newCluster(t, setup)
	for _, env := range []string{"sample", "generate", "reward", "train", "health"} {
		c.worker(env, cfg, "--env", env)
	}
	first := c.start("run", c.runArgs(cfg)...)
	first.waitOutput(t, "iteration 2:")
	first.kill()
	// Run again, the driver says why it waits and for how long: the lost
	// driver's heartbeat (2s) has to time out first.
	host, _ := os.Hostname()
	rerun := c.start("rerun", c.runArgs(cfg)...)
	rerun.waitOutput(t, fmt.Sprintf("run standin: its loop is held by driver %s/%d/driver, last heard from ", host, first.cmd.Process.Pid),
		" ago; if that driver is gone, this process resumes it when its heartbeat times out, in at most ")
	c.worker("driver", cfg, "--driver")
	raw := c.runResult(t, "standin", "after its driver was killed")
	var out runJSON
	if err := json.Unmarshal(raw, &out); err != nil || out.Iterations != 6 || out.NewIterations < 1 || out.NewIterations > 4 {
		t.Fatalf("workflow result %s: want 6 iterations, the last 1–4 committed by the new driver", raw)
	}
	again := rlpipe(t, c.dir, c.env, c.runArgs(cfg, "-o", "json")...)
	var second runJSON
	if err := json.Unmarshal([]byte(again), &second); err != nil || second.Iterations != 6 || second.NewIterations != 0 {
		t.Fatalf("a second run printed %q: want 6 iterations and none new", again)
	}
	// Asked for fewer iterations than the run has, the run does nothing
	// and says so with exit 1, as on the local executor.
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fewer := filepath.Join(t.TempDir(), "fewer.yaml")
	if err := os.WriteFile(fewer, []byte(strings.Replace(string(b), "iterations: 6", "iterations: 2", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(rlpipeBin, c.runArgs(fewer)...)
	cmd.Dir, cmd.Env = c.dir, append(os.Environ(), c.env...)
	msg, err := cmd.CombinedOutput()
	wantMsg := fewer + ":12:1: iterations: 2, but run standin already has 6 iterations committed"
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(msg), wantMsg) || !strings.Contains(string(msg), "nothing was run") {
		t.Fatalf("a run asked for 2 of 6 committed iterations: %v\n%s\nwant exit 1 and %q", err, msg, wantMsg)
	}
	got, _ := c.storeSums("standin")
	sameSums(t, want, got)
}

// arithmeticConfig writes examples/arithmetic/pipeline.yaml with the
// replacements edits (each must be found) and returns its path and a
// setup that makes the store and its arith dataset (dataset's extra
// flags).
func arithmeticConfig(t testing.TB, edits map[string]string, dataset ...string) (string, func(dir, store string)) {
	t.Helper()
	b, err := os.ReadFile("../../../examples/arithmetic/pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	spec, err := filepath.Abs("../../../examples/arithmetic/reward.yaml")
	if err != nil {
		t.Fatal(err)
	}
	edits["spec: reward.yaml"] = "spec: " + spec
	for old, new := range edits {
		if !strings.Contains(src, old) {
			t.Fatalf("the example no longer has %q; update this test", old)
		}
		src = strings.Replace(src, old, new, 1)
	}
	cfg := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	setup := func(dir, store string) {
		rlpipe(t, dir, nil, "--store", store, "init-store")
		rlpipe(t, dir, nil, append([]string{"--store", store, "dataset", "arith", "main"}, dataset...)...)
	}
	return cfg, setup
}

// arithmeticWorkers starts a worker process per environment of the
// arithmetic demo; the grpo train stage brings the advantages step, in
// its own environment.
func (c *cluster) arithmeticWorkers(cfg string) {
	for _, env := range []string{"sample", "generate", "reward", "advantages", "train", "eval", "health"} {
		c.worker(env, cfg, "--env", env)
	}
}

// TestArithmeticDemoAcrossProcesses runs the embedded GRPO demo, cut to 4
// iterations with evaluations of the base model and iterations 2 and 4,
// with a worker process per environment (the model loaded once per
// process and kept warm): trajectories, rewards, adapters with their
// optimizer state, evaluations and the loop state equal the local
// executor's, byte for byte.
func TestArithmeticDemoAcrossProcesses(t *testing.T) {
	cfg, setup := arithmeticConfig(t, map[string]string{
		"iterations: 60":   "iterations: 4",
		"every: 10":        "every: 2",
		"n: 16":            "n: 4",
		"k: [1, 4, 8, 16]": "k: [1, 4]",
	}, "--train", "256", "--heldout", "50")
	want := localSums(t, setup, cfg, "arith")
	c := newCluster(t, setup)
	c.arithmeticWorkers(cfg)
	out := rlpipe(t, c.dir, c.env, c.runArgs(cfg, "-o", "json")...)
	var res runJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Iterations != 4 || res.NewIterations != 4 {
		t.Fatalf("run printed %q: want 4 new iterations", out)
	}
	got, _ := c.storeSums("arith")
	evals := 0
	for p := range want {
		if strings.HasPrefix(p, "evals/") && strings.HasSuffix(p, "summary.parquet") {
			evals++
		}
	}
	if evals != 3 {
		t.Fatalf("the local run has %d eval summaries, want 3 (base, 2, 4)", evals)
	}
	sameSums(t, want, got)
}

// TestDetachedDriverHandsOver interrupts `rlpipe run --executor temporal`
// (the only driver) with Ctrl-C after its first iteration: it detaches,
// saying how to attach again, and a driver worker started afterwards
// finishes the run — the interrupted loop is not taken for a failed run.
func TestDetachedDriverHandsOver(t *testing.T) {
	cfg, setup := standinConfig(t, "500ms")
	c := newCluster(t, setup)
	for _, env := range []string{"sample", "generate", "reward", "train", "health"} {
		c.worker(env, cfg, "--env", env)
	}
	first := c.start("run", c.runArgs(cfg)...)
	first.waitOutput(t, "iteration 1:")
	if err := syscall.Kill(first.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := first.wait(t); err == nil {
		t.Fatal("a detached run exited 0")
	}
	if !strings.Contains(first.stderr.String(), "detached from workflow "+temporalrun.RunID(c.repo, "standin")) {
		t.Fatalf("the run did not say it detached:\n%s", first.stderr.String())
	}
	// Its own line says so; the SDK's warnings and errors about what
	// Ctrl-C cut short are not on screen.
	for _, l := range strings.Split(first.stderr.String(), "\n") {
		if strings.Contains(l, `"component":"temporal"`) && (strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`)) {
			t.Errorf("after Ctrl-C the run printed the SDK's %s", l)
		}
	}
	standby := c.worker("driver", cfg, "--driver")
	raw := c.runResult(t, "standin", "after its driver detached")
	var out runJSON
	if err := json.Unmarshal(raw, &out); err != nil || out.Iterations != 6 {
		t.Fatalf("workflow result %s: want 6 iterations", raw)
	}
	if !strings.Contains(standby.stdout.String(), "iteration 6:") {
		t.Errorf("the standby driver did not run the rest of the loop; its output:\n%s", standby.stdout.String())
	}
}

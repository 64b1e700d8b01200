package temporaltests_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/temporaltest"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun"
)

// fastStats shortens how long the server caches a task queue's
// statistics (5 s by default on 1.29) so that a backlog shows within a
// poll or two and the scaling tests stay short.
func fastStats() temporaltest.TestServerOption {
	return devConfig(dynamicconfig.StaticClient{
		dynamicconfig.TaskQueueInfoByBuildIdTTL.Key(): []dynamicconfig.ConstrainedValue{{Value: 300 * time.Millisecond}},
	})
}

// scaleRow is a "scale" line of `rlpipe worker --scale --log-level info`.
type scaleRow struct {
	Env       string `json:"env"`
	Backlog   int    `json:"backlog"`
	Processes int    `json:"processes"`
	Stopping  int    `json:"stopping"`
	Busy      int    `json:"busy"`
	PIDs      []int  `json:"pids"`
	BusyPIDs  []int  `json:"busy_pids"`
	Want      int    `json:"want"`
}

func (r scaleRow) String() string {
	return fmt.Sprintf("backlog %d, processes %d (+%d stopping), busy %d %v, want %d", r.Backlog, r.Processes, r.Stopping, r.Busy, r.BusyPIDs, r.Want)
}

// scaleRig is a supervisor (`rlpipe worker --scale sample=…`) over the
// stand-in pipeline whose sample stage sleeps 500 ms and runs one attempt
// per process, and a driver in this process that puts sample calls in
// flight through the Temporal executor.
type scaleRig struct {
	tb   testing.TB
	c    *cluster
	sup  *proc
	it   *pipeline.Iteration
	st   artifacts.Store
	task *pipeline.Task
	ctx  context.Context

	mu       sync.Mutex
	events   []pipeline.Event
	nodes    []*pipeline.Node
	inflight atomic.Int64
	// cursor is the index of the first scale line until reads.
	cursor int
}

func newScaleRig(tb testing.TB, scale string) *scaleRig {
	tb.Helper()
	cfgPath, setup := editedStandin(tb,
		"sample:   {resources: {cpu: 0.5}}", "sample:   {resources: {cpu: 0.5}, concurrency: 1}",
		"sample:   {kind: standin, sleep: 100ms}", "sample:   {kind: standin, sleep: 500ms}")
	c := newCluster(tb, setup, fastStats())
	r := &scaleRig{tb: tb, c: c, ctx: context.Background()}
	r.sup = c.start("supervisor", append([]string{"worker", "-f", cfgPath, "--scale", scale, "--scale-poll", "100ms", "--scale-idle", "1s", "--log-level", "info"}, c.temporal()...)...)
	r.sup.waitOutput(tb, "rlpipe worker: scaling sample")

	for _, kv := range c.env {
		k, v, _ := strings.Cut(kv, "=")
		tb.Setenv(k, v)
	}
	st, err := artifacts.Open(r.ctx, "lakefs://"+c.repo, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	r.st = st
	// The config's sample task, as the worker processes build it: the
	// stand-in's, in environment sample (its sleep runs there).
	r.task = standin.Stages(standin.Options{SampleSleep: 500 * time.Millisecond}).Sample
	envs := map[string]pipeline.Settings{"sample": {Resources: pipeline.Resources{CPU: 0.5}, Concurrency: 1}}
	// The pipeline's id, from the queue the supervisor names.
	m := regexp.MustCompile(`\(rlpipe/` + regexp.QuoteMeta(c.repo) + `/([0-9a-f]{12})/sample, `).FindStringSubmatch(r.sup.stderr.String())
	if m == nil {
		tb.Fatalf("no pipeline id in the supervisor's first line:\n%s", r.sup.stderr.String())
	}
	pid := m[1]
	x, err := temporalrun.NewExecutor(temporalrun.ExecutorOptions{Client: c.ts.GetDefaultClient(), Repository: c.repo, Pipeline: pid, Store: st, Heartbeat: 2 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	run, err := pipeline.Open(r.ctx, st, pipeline.RunOptions{Name: "scale", Envs: envs, Executor: x, NoCache: true,
		Machine: &pipeline.Machine{CPU: 64, MemoryMB: 1 << 16},
		OnEvent: func(e pipeline.Event) {
			r.mu.Lock()
			r.events = append(r.events, e)
			r.mu.Unlock()
		}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { run.Close() })
	r.it = run.Iteration(1)
	return r
}

// submit puts n more sample calls in flight, each writing its prompts
// under scale/NN.
func (r *scaleRig) submit(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for range n {
		i := len(r.nodes)
		nd := r.it.Go(r.ctx, r.task, pipeline.Call{Name: fmt.Sprintf("sample-%02d", i), Dir: fmt.Sprintf("scale/%02d", i),
			Inputs: map[string]pipeline.Artifact{"dataset": pipeline.StoreArtifact("main", "data/prompts.parquet")},
			Params: map[string]int{"cursor": i, "count": 2, "iteration": 1}})
		r.nodes = append(r.nodes, nd)
		r.inflight.Add(1)
		go func() { _ = nd.Wait(r.ctx); r.inflight.Add(-1) }()
	}
}

// wait waits for every call submitted so far.
func (r *scaleRig) wait() {
	r.tb.Helper()
	r.mu.Lock()
	nodes := slices.Clone(r.nodes)
	r.mu.Unlock()
	for _, nd := range nodes {
		if err := nd.Wait(r.ctx); err != nil {
			r.tb.Fatalf("a sample call failed: %v\nsupervisor:\n%s", err, tail(r.sup.stderr.String(), 60))
		}
	}
}

// trace is the supervisor's scale lines so far.
func (r *scaleRig) trace() []scaleRow {
	var rows []scaleRow
	for _, l := range strings.Split(r.sup.stderr.String(), "\n") {
		if !strings.Contains(l, `"message":"scale"`) {
			continue
		}
		var row scaleRow
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			r.tb.Fatalf("a scale line is not JSON: %v\n%s", err, l)
		}
		rows = append(rows, row)
	}
	return rows
}

// until waits for a scale line after the last one until returned that
// satisfies ok, failing after five minutes without one (a guard against
// a hang, not a measure).
func (r *scaleRig) until(what string, ok func(scaleRow) bool) scaleRow {
	r.tb.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		rows := r.trace()
		for i := r.cursor; i < len(rows); i++ {
			if ok(rows[i]) {
				r.cursor = i + 1
				return rows[i]
			}
		}
		select {
		case <-r.sup.exited:
			r.tb.Fatalf("the supervisor exited (%v) before %s:\n%s", r.sup.err, what, tail(r.sup.stderr.String(), 60))
		default:
		}
		if time.Now().After(deadline) {
			r.tb.Fatalf("the supervisor never showed %s:\n%s", what, tail(r.sup.stderr.String(), 60))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// latest waits until the supervisor's newest scale line satisfies ok,
// and returns it; until then reads the lines after it.
func (r *scaleRig) latest(what string, ok func(scaleRow) bool) scaleRow {
	r.tb.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if rows := r.trace(); len(rows) > 0 && ok(rows[len(rows)-1]) {
			r.cursor = len(rows)
			return rows[len(rows)-1]
		}
		if time.Now().After(deadline) {
			r.tb.Fatalf("the supervisor never showed %s:\n%s", what, tail(r.sup.stderr.String(), 60))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lostAttempts waits for the supervisor's line about the SIGKILLed
// process pid and returns the attempts it says the process was running.
func (r *scaleRig) lostAttempts(pid int) int {
	r.tb.Helper()
	key := fmt.Sprintf(`"pid":%d,"status":"signal: killed"`, pid)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		for _, l := range strings.Split(r.sup.stderr.String(), "\n") {
			if strings.Contains(l, key) {
				var e struct {
					Attempts *int `json:"attempts"`
				}
				if err := json.Unmarshal([]byte(l), &e); err != nil || e.Attempts == nil {
					r.tb.Fatalf("the supervisor's line about process %d has no attempts (%v): %s", pid, err, l)
				}
				return *e.Attempts
			}
		}
		if time.Now().After(deadline) {
			r.tb.Fatalf("the supervisor never reported process %d killed:\n%s", pid, tail(r.sup.stderr.String(), 40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestScaleFollowsTasksInFlight runs `rlpipe worker --scale sample=1:3`
// against a Temporal server while a driver puts sample calls (500 ms
// each, one at a time per process) in flight: the supervisor's trace
// rises above the minimum while tasks wait, and falls back to it once
// they are done. Then the fault: as soon as the supervisor begins that
// scale-down, a second wave is sent, and a process running one of its
// attempts is SIGKILLed. Its attempt runs again elsewhere after the
// heartbeat timeout, and every call of both waves finished exactly once,
// its output staged.
//
// A kill can land just after the attempt it aimed at finished (the
// trace is a poll behind): the supervisor's line about the killed
// process says how many attempts it was running, and when none, another
// call is sent and the next busy process is killed, up to three times.
func TestScaleFollowsTasksInFlight(t *testing.T) {
	r := newScaleRig(t, "sample=1:3")
	r.until("the minimum of 1 process", func(s scaleRow) bool { return s.Processes == 1 })
	const wave1, wave2 = 16, 4
	r.submit(wave1)
	up := r.until("more processes while tasks wait", func(s scaleRow) bool { return s.Processes > 1 })
	if up.Backlog == 0 && up.Busy == 0 {
		t.Errorf("the processes rose with nothing waiting or running: %s", up)
	}
	r.wait()
	// Idle after the wave: the supervisor stops the surplus processes.
	down := r.until("a scale-down", func(s scaleRow) bool { return s.Stopping > 0 })
	r.submit(wave2)
	var victim int
	var busy scaleRow
	for try := 1; ; try++ {
		busy = r.latest("an attempt of the second wave running", func(s scaleRow) bool { return len(s.BusyPIDs) > 0 })
		victim = busy.BusyPIDs[0]
		// A process gone already (its attempt ended and it stopped idle)
		// is a miss too.
		if err := syscall.Kill(victim, syscall.SIGKILL); err == nil && r.lostAttempts(victim) > 0 {
			break
		}
		if try == 3 {
			t.Fatalf("three kills each landed between two attempts:\n%s", tail(r.sup.stderr.String(), 60))
		}
		r.submit(1)
	}
	r.wait()
	last := r.until("the minimum again, idle", func(s scaleRow) bool {
		return s.Processes == 1 && s.Stopping == 0 && s.Busy == 0 && s.Backlog == 0
	})
	t.Logf("rose to %s; scale-down began at %s; killed %d at %s; settled at %s", up, down, victim, busy, last)

	// The trace: above the minimum only while there was work, at most
	// the maximum, and back at the minimum at the end.
	peak := 0
	for _, s := range r.trace() {
		peak = max(peak, s.Processes)
		if s.Processes > 3 {
			t.Errorf("more processes than the maximum: %s", s)
		}
	}
	if peak < 2 {
		t.Errorf("the processes never rose above the minimum (peak %d)", peak)
	}

	// Every call finished once; the killed attempt is recorded as lost
	// and its task finished on another worker.
	host, _ := os.Hostname()
	killed := fmt.Sprintf("%s/%d", host, victim)
	finished := map[string]int{}
	finishedOn := map[string]string{}
	var lost []string
	r.mu.Lock()
	for _, e := range r.events {
		switch e.Kind {
		case pipeline.EventFinished:
			finished[e.Task]++
			finishedOn[e.Task] = e.Worker
		case pipeline.EventRetried:
			if strings.Contains(e.Error, "lost: its worker stopped heartbeating") {
				lost = append(lost, e.Task)
			}
		}
	}
	r.mu.Unlock()
	if len(lost) == 0 {
		t.Errorf("no task.retried event records the killed attempt as lost")
	}
	for _, task := range lost {
		if on := finishedOn[task]; on == "" || on == killed {
			t.Errorf("%s, whose attempt was lost, finished on %q, want another worker than %s", task, on, killed)
		}
	}
	if len(finished) != len(r.nodes) {
		t.Errorf("%d calls finished, want %d", len(finished), len(r.nodes))
	}
	for name, n := range finished {
		if n != 1 {
			t.Errorf("%s finished %d times", name, n)
		}
	}
	// Each call's output is staged where its result says, with its
	// checksum.
	paths := map[string]bool{}
	for _, nd := range r.nodes {
		a, err := nd.Result(pipeline.OutPrompts)
		if err != nil {
			t.Fatal(err)
		}
		paths[a.Ref+":"+a.Path] = true
		e, err := r.st.StatObject(r.ctx, a.Ref, a.Path)
		if err != nil || e.Checksum != a.Checksum {
			t.Errorf("output %s:%s: %v, checksum %q, want %q", a.Ref, a.Path, err, e.Checksum, a.Checksum)
		}
	}
	if len(paths) != len(r.nodes) {
		t.Errorf("%d distinct outputs, want %d", len(paths), len(r.nodes))
	}
}

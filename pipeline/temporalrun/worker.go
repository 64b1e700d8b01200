package temporalrun

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/rlpipe/rlpipe/pipeline"
)

// WorkerOptions configure Serve.
type WorkerOptions struct {
	// Client is a connected Temporal client.
	Client client.Client
	// Repository is the store's repository name and Pipeline the
	// pipeline's id: together they scope the queues (Queue).
	Repository string
	Pipeline   string
	// Envs are the environments whose queues this process serves; each
	// gets the task workflow and the attempt activity.
	Envs []string
	// Concurrency caps attempts at once per environment (default 1); the
	// pipeline.Worker still admits them under its machine's resources.
	Concurrency map[string]int
	// Worker runs the attempts (required with Envs).
	Worker *pipeline.Worker
	// Drive, when set, also serves the driver queue: this process can run
	// the loop of any run of the repository.
	Drive Driver
	// Name identifies this process in task results (default host/pid).
	Name string
	// Logger receives a line per attempt started and ended.
	Logger zerolog.Logger
}

// Serve polls the queues until ctx is done, then stops the workers:
// running attempts are cancelled and run again on other workers without
// counting against their retries, and a loop this process drives stops
// (releasing its run's lock) for another driver to resume.
func Serve(ctx context.Context, o WorkerOptions) error {
	ws, err := Workers(o)
	if err != nil {
		return err
	}
	started := 0
	defer func() {
		for _, w := range ws[:started] {
			w.Stop()
		}
	}()
	for _, w := range ws {
		if err := w.Start(); err != nil {
			return fmt.Errorf("start Temporal worker: %w", err)
		}
		started++
	}
	<-ctx.Done()
	return nil
}

// stopGrace is how long a stopping worker waits for its attempts and
// loops to wind down and report.
const stopGrace = 30 * time.Second

// Workers builds (without starting) one Temporal worker per queue Serve
// would poll: the environments' queues, then the driver queue.
func Workers(o WorkerOptions) ([]worker.Worker, error) {
	if o.Client == nil || o.Repository == "" || (len(o.Envs) > 0 && o.Pipeline == "") {
		return nil, fmt.Errorf("%w: a worker needs a Temporal client, the store's repository name and the pipeline's id", pipeline.ErrConfig)
	}
	if len(o.Envs) == 0 && o.Drive == nil {
		return nil, fmt.Errorf("%w: a worker must serve at least one environment (--env NAME) or the driver (--driver)", pipeline.ErrConfig)
	}
	if len(o.Envs) > 0 && o.Worker == nil {
		return nil, errors.New("temporalrun: WorkerOptions.Worker is required to serve environments")
	}
	name := o.Name
	if name == "" {
		name = workerName()
	}
	setBinaryID.Do(func() { worker.SetBinaryChecksum(binaryID()) })
	envs := append([]string(nil), o.Envs...)
	sort.Strings(envs)
	var out []worker.Worker
	for i, env := range envs {
		if i > 0 && envs[i-1] == env {
			continue
		}
		n := o.Concurrency[env]
		if n <= 0 {
			n = 1
		}
		w := worker.New(o.Client, Queue(o.Repository, o.Pipeline, env), worker.Options{
			MaxConcurrentActivityExecutionSize: n,
			MaxConcurrentActivityTaskPollers:   activityPollers(n),
			Identity:                           name + "/" + env,
			// Time for a stopped attempt to report itself stopped.
			WorkerStopTimeout: stopGrace,
		})
		w.RegisterWorkflowWithOptions(taskWorkflow, workflow.RegisterOptions{Name: TaskWorkflow})
		// The fast path's attempts are local activities; the
		// pipeline.Worker admits them under the environment's concurrency
		// without waiting (Worker.TryAttempt), and one it has no room for
		// goes to the queue.
		w.RegisterWorkflowWithOptions(taskWorkflow, workflow.RegisterOptions{Name: TaskFastWorkflow})
		a := &attempts{w: o.Worker, name: name, log: o.Logger, slots: make(chan struct{}, n)}
		w.RegisterActivityWithOptions(a.Attempt, activity.RegisterOptions{Name: AttemptAction})
		out = append(out, w)
	}
	if o.Drive != nil {
		// The grace lets a detached loop release its run's lock.
		w := worker.New(o.Client, DriverQueue(o.Repository), worker.Options{Identity: name + "/driver", WorkerStopTimeout: stopGrace})
		w.RegisterWorkflowWithOptions(runWorkflow, workflow.RegisterOptions{Name: RunWorkflow})
		d := &drive{f: o.Drive, c: o.Client}
		w.RegisterActivityWithOptions(d.Drive, activity.RegisterOptions{Name: DriveAction})
		w.RegisterActivityWithOptions(d.CancelTasks, activity.RegisterOptions{Name: CancelTasksAction})
		out = append(out, w)
	}
	return out, nil
}

// activityPollers is how many of an environment's n attempt slots poll
// the queue: one fewer than n, at most two (the SDK's default). A poll
// holds its slot while it waits, and the server hands a worker the
// attempt its own workflow task scheduled (eager execution, on with
// `rlpipe temporal dev`) only when the worker has a slot no poll holds:
// with two pollers, a worker of two slots never has one.
func activityPollers(n int) int { return max(1, min(2, n-1)) }

var setBinaryID sync.Once

// binaryID names this build for Temporal's reset points: the module's
// version and VCS revision from the binary's build info. Without it the
// SDK reads the whole executable to take its MD5 when the first worker
// is built, a quarter of a second of CPU on every driver's start.
func binaryID() string {
	id := "rlpipe"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return id
	}
	id += "@" + bi.Main.Version
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			id += "+" + s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			id += "+modified"
		}
	}
	return id
}

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/driver"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun"
)

// Environment variables of the Temporal connection (the names Temporal's
// own CLI reads).
const (
	EnvTemporalAddress   = "TEMPORAL_ADDRESS"
	EnvTemporalNamespace = "TEMPORAL_NAMESPACE"
)

// temporalOptions are the flags that reach a Temporal cluster.
type temporalOptions struct {
	address   string
	namespace string
	heartbeat time.Duration
	noDriver  bool
}

// AddFlags adds the connection flags; the run command also takes
// --heartbeat, which the run's workflows carry to every worker.
func (o *temporalOptions) AddFlags(fs *pflag.FlagSet, heartbeat bool) {
	fs.StringVar(&o.address, "temporal", "", "Temporal frontend HOST:PORT (env "+EnvTemporalAddress+", default "+temporalrun.DefaultAddress+")")
	fs.StringVar(&o.namespace, "namespace", "", "Temporal namespace (env "+EnvTemporalNamespace+", default "+temporalrun.DefaultNamespace+")")
	o.heartbeat = temporalrun.DefaultHeartbeat
	if heartbeat {
		fs.DurationVar(&o.heartbeat, "heartbeat", temporalrun.DefaultHeartbeat, "how long a worker or the driver may go silent before its work moves to another process")
	}
}

// dialTimeout bounds how long dial waits for a Temporal frontend.
const dialTimeout = 10 * time.Second

// resolve is the frontend and namespace: the flags, else the variables,
// else the defaults.
func (o *temporalOptions) resolve(g *rootOptions) (addr, ns string) {
	addr, ns = o.address, o.namespace
	if addr == "" {
		addr = g.env.getenv(EnvTemporalAddress)
	}
	if addr == "" {
		addr = temporalrun.DefaultAddress
	}
	if ns == "" {
		ns = g.env.getenv(EnvTemporalNamespace)
	}
	if ns == "" {
		ns = temporalrun.DefaultNamespace
	}
	return addr, ns
}

// dial connects to Temporal.
func (o *temporalOptions) dial(ctx context.Context, g *rootOptions) (client.Client, string, error) {
	addr, ns := o.resolve(g)
	if o.heartbeat < time.Second {
		return nil, "", usagef("--heartbeat %s: use at least 1s", o.heartbeat)
	}
	// A refused connection fails at once; an address that drops packets
	// fails after dialTimeout instead of hanging.
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	// Once ctx ends (Ctrl-C) the SDK's messages about stopping are debug
	// lines: the command says it stopped in one line of its own.
	c, err := client.DialContext(dctx, client.Options{HostPort: addr, Namespace: ns, Logger: temporalrun.QuietAfter(ctx, g.logger)})
	if err != nil {
		return nil, "", failure(fmt.Errorf("cannot reach Temporal at %s (namespace %s): %w\nhint: start a dev server on this machine with `rlpipe temporal dev` (or Temporal's `temporal server start-dev`), or pass --temporal HOST:PORT (env %s)", addr, ns, err, EnvTemporalAddress))
	}
	return c, ns, nil
}

// sharedStore refuses a store that other processes cannot open: the
// embedded store belongs to one process at a time.
func sharedStore(uri string) error {
	if artifacts.Scheme(uri) != "file" {
		return nil
	}
	return usagef("--store %s is an embedded store, which one process opens at a time; workers on Temporal need a store they all reach: serve it with `rlpipe --store %s store serve` and pass --store lakefs://REPO with the variables it prints (or use a lakeFS server; see docs/DEPLOY.md)", uri, shellQuote(uri))
}

// storeFor is the store a pipeline command uses: --store, else
// RLPIPE_STORE, else the config's store, else the default.
func storeFor(cmd *cobra.Command, g *rootOptions, cfg *config.Config) {
	if !cmd.Flags().Changed("store") && g.env.getenv(EnvStore) == "" && cfg.Store != "" {
		g.store = cfg.Store
	}
}

func newWorkerCommand(g *rootOptions) *cobra.Command {
	var (
		file    string
		ov      overrideOptions
		envs    []string
		drive   bool
		gpus    int
		gpuType string
		t       temporalOptions
		scale   scaleOptions
	)
	cmd := &cobra.Command{
		Use:   "worker (--env NAME [--env NAME...] [--driver] | --scale ENV=MIN:MAX[,ENV=MIN:MAX…]) -f pipeline.yaml [key.path=value …]",
		Short: "serve task environments (and the driver) of a pipeline on Temporal",
		Long: `Serve one or more task environments of a pipeline from Temporal: the
worker polls each environment's task queue and runs the attempts of its
tasks here, reading inputs from the store and staging outputs on the run
branch. It keeps warm state (a loaded model, a built sandbox world)
between tasks for as long as it runs. With --driver it also runs the loop
of runs started with ` + "`rlpipe run --executor temporal`" + `, taking over
from a driver that died.

Start every worker from the same pipeline config and rlpipe build as the
driver, against the same store (a lakeFS repository, or an embedded store
served by ` + "`rlpipe store serve`" + `). A task whose environment has no
worker waits on its queue until one starts. Stop with Ctrl-C: running
attempts are cancelled and run again on another worker.

With --scale ENV=MIN:MAX this process serves nothing itself: it runs
between MIN and MAX worker processes of each environment it names on this
host (` + "`rlpipe worker --env ENV`" + ` with the same config, store and
Temporal flags), starting one as tasks wait on the environment's queue and
stopping one (SIGTERM) that has run no attempt for --scale-idle.`,
		Example: `  rlpipe --store lakefs://rl worker -f pipeline.yaml --env generate --temporal temporal.internal:7233
  rlpipe --store lakefs://rl worker -f pipeline.yaml --env train --gpus 8 --gpu-type A100
  rlpipe --store lakefs://rl worker -f pipeline.yaml --env sample,reward,advantages,eval,health --driver
  rlpipe --store lakefs://rl worker -f pipeline.yaml --scale generate=0:4,reward=1:8 --scale-idle 1m`,
		Args: overrideArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := ov.load(file, args)
			if err != nil {
				return failure(err)
			}
			storeFor(cmd, g, cfg)
			if err := sharedStore(g.store); err != nil {
				return err
			}
			if len(scale.limits) > 0 && (len(envs) > 0 || drive) {
				return usagef("worker: --scale runs worker processes of the environments it names; give it without --env and --driver (serve the driver from another `rlpipe worker --driver`)")
			}
			if len(envs) == 0 && !drive && len(scale.limits) == 0 {
				return usagef("worker: name the environments to serve with --env NAME (or --driver to run loops, or --scale ENV=MIN:MAX to run worker processes that follow the work)")
			}
			if gpus < -1 {
				return usagef("worker: --gpus %d: use 0 or more (the GPUs this host hands to tasks)", gpus)
			}
			plan, err := cfg.Plan(cmd.Context())
			if err != nil {
				return failure(err)
			}
			defer plan.Close()
			known := pipelineEnvs(plan)
			for _, e := range envs {
				if !known[e] {
					return usagef("worker: --env %q: %s", e, notAnEnv(cfg.File(), known))
				}
			}
			pid, err := driver.PipelineID(cfg)
			if err != nil {
				return failure(err)
			}
			if gpus >= 0 {
				m := pipeline.ThisMachine()
				if plan.Run.Machine != nil {
					m = *plan.Run.Machine
				}
				m.GPU, m.GPUType = gpus, gpuType
				plan.Run.Machine = &m
			}
			if len(scale.limits) > 0 {
				return superviseWorkers(cmd, g, workerLaunch{file: file, set: ov.set, args: args, gpus: gpus, gpuType: gpuType, t: t}, scale, plan, known, pid)
			}
			c, ns, err := t.dial(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer c.Close()
			return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
				repo, err := st.Repository(ctx)
				if err != nil {
					return failure(withOp(err, "open store %s", g.store))
				}
				w, err := pipeline.NewWorker(st, pipeline.WorkerOptions{
					Tasks: plan.Stages.Tasks(), Envs: plan.Run.Envs, Machine: plan.Run.Machine, Logger: g.logger,
				})
				if err != nil {
					return failure(err)
				}
				defer w.Close()
				opts := temporalrun.WorkerOptions{Client: c, Repository: repo.Name, Pipeline: pid, Envs: envs, Worker: w,
					Concurrency: concurrency(plan.Run, envs), Logger: g.logger}
				if drive {
					opts.Drive = newDriver(g, c, runDisplay{stderr: g.env.stderr, logger: g.logger}.runner(printer{w: cmd.OutOrStdout()}))
				}
				queues := []string{}
				for _, e := range envs {
					queues = append(queues, fmt.Sprintf("%s (%s, %d at once)", e, temporalrun.Queue(repo.Name, pid, e), opts.Concurrency[e]))
				}
				if drive {
					queues = append(queues, "driver ("+temporalrun.DriverQueue(repo.Name)+")")
				}
				fmt.Fprintf(g.env.stderr, "rlpipe worker: serving %s on Temporal namespace %s, store %s; Ctrl-C stops\n", strings.Join(queues, ", "), ns, g.store)
				if err := temporalrun.Serve(ctx, opts); err != nil {
					return failure(err)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "pipeline.yaml", "the pipeline config (the driver's)")
	ov.AddFlags(cmd.Flags())
	cmd.Flags().StringSliceVar(&envs, "env", nil, "an environment to serve (repeat, or comma-separate); tasks without one are in \"default\"")
	cmd.Flags().BoolVar(&drive, "driver", false, "also run loops of runs started with --executor temporal")
	cmd.Flags().IntVar(&gpus, "gpus", -1, "GPUs this host hands to tasks (default: the config's machine section, else none)")
	cmd.Flags().StringVar(&gpuType, "gpu-type", "", "the type of this host's GPUs, matched against resources.gpu_type")
	t.AddFlags(cmd.Flags(), false)
	scale.AddFlags(cmd.Flags())
	return cmd
}

// pipelineEnvs are the environments a plan's tasks run in, and the
// environments it defines; tasks without one are in "default".
func pipelineEnvs(plan config.Plan) map[string]bool {
	known := map[string]bool{"default": true}
	for name := range plan.Run.Envs {
		if name != "" {
			known[name] = true
		}
	}
	for _, t := range plan.Stages.Tasks() {
		if t.Env != "" {
			known[t.Env] = true
		}
	}
	return known
}

// notAnEnv says that a name is none of the pipeline's environments.
func notAnEnv(file string, known map[string]bool) string {
	return fmt.Sprintf("no task of %s runs in it (its environments: %s)", file, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
}

// concurrency is how many attempts of each environment a worker runs at
// once: the environment's concurrency, else as many as its CPU request
// fits on the machine.
func concurrency(run pipeline.RunOptions, envs []string) map[string]int {
	m := pipeline.ThisMachine()
	if run.Machine != nil {
		m = *run.Machine
	}
	out := map[string]int{}
	for _, e := range envs {
		s := run.Envs[e]
		n := s.Concurrency
		if n <= 0 {
			cpu := s.Resources.CPU
			if cpu <= 0 {
				cpu = 1
			}
			n = int(math.Floor(m.CPU / cpu))
		}
		out[e] = max(n, 1)
	}
	return out
}

// newDriver is the driver a driver worker serves: each run's loop run
// by run (runDisplay.runner: shown as rlpipe run shows it).
func newDriver(g *rootOptions, c client.Client, run func(context.Context, artifacts.Store, *config.Config, driver.Options) (driver.Summary, error)) temporalrun.Driver {
	return temporalDriver(temporalDriverOptions{client: c, load: loadConfig, logger: g.logger, run: run})
}

// runOnTemporal is `rlpipe run --executor temporal`: start (or attach to)
// the run's workflow, drive it from this process unless --no-driver, and
// wait for it.
func runOnTemporal(cmd *cobra.Command, g *rootOptions, cfg *config.Config, o runOptions, d runDisplay) error {
	if err := sharedStore(g.store); err != nil {
		return err
	}
	name, err := runName(cfg, o)
	if err != nil {
		return err
	}
	hash, err := cfg.Hash()
	if err != nil {
		return failure(err)
	}
	path, err := filepath.Abs(cfg.File())
	if err != nil {
		return failure(err)
	}
	c, ns, err := o.temporal.dial(cmd.Context(), g)
	if err != nil {
		return err
	}
	defer c.Close()
	p := g.printer(cmd)
	return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
		repo, err := st.Repository(ctx)
		if err != nil {
			return failure(withOp(err, "open store %s", g.store))
		}
		in := temporalrun.RunInput{Run: name, Repository: repo.Name, Config: path, ConfigHash: hash, Overrides: cfg.Overrides(), Store: g.store,
			NoCache: o.noCache, NoOverlap: o.noOverlap, AllowConfigChange: o.allowConfigChange, Heartbeat: o.temporal.heartbeat}
		// The iterations another process's driver commits are shown from
		// the store (docs/DEPLOY.md); those of this process's driver by
		// its display.
		f, err := newFollower(ctx, st, cfg, name, d, p)
		if err != nil {
			return failure(err)
		}
		served := make(chan error, 1)
		wctx, stopWorker := context.WithCancel(ctx)
		defer func() { stopWorker(); <-served }()
		if o.temporal.noDriver {
			served <- nil
		} else {
			drive := newDriver(g, c, f.wrap(d.runner(p)))
			go func() {
				served <- temporalrun.Serve(wctx, temporalrun.WorkerOptions{Client: c, Repository: repo.Name, Drive: drive})
			}()
		}
		wr, err := temporalrun.StartRun(ctx, c, in)
		if err != nil {
			return failure(err)
		}
		fmt.Fprintf(d.stderr, "run %s: workflow %s on Temporal namespace %s; Ctrl-C detaches (the run goes on while a driver worker serves it)\n", name, wr.GetID(), ns)
		if h, held, err := temporalrun.LoopHolder(ctx, c, repo.Name, name); err == nil && held && !h.Mine() {
			who := "this process resumes it"
			if o.temporal.noDriver {
				who = "a driver worker resumes it"
			}
			fmt.Fprintf(d.stderr, "run %s: its loop is held by driver %s, last heard from %s ago; if that driver is gone, %s when its heartbeat times out, in at most %s\n",
				name, h.Worker, time.Since(h.LastHeartbeat).Round(time.Second), who, h.Lost(time.Now()))
		}
		fctx, stopFollow := context.WithCancel(ctx)
		followed := make(chan struct{})
		go func() { defer close(followed); f.follow(fctx) }()
		var raw json.RawMessage
		err = temporalrun.Result(ctx, c, wr, &raw)
		stopFollow()
		<-followed
		if err == nil {
			// The last iterations, before the summary.
			f.catchUp(ctx)
		}
		if ctx.Err() != nil {
			return failure(explain(ctx.Err(), "run %s: detached from workflow %s; the run goes on on Temporal while a driver worker (`rlpipe worker --driver`) serves it; run the same command again to attach", name, wr.GetID()))
		}
		if err != nil {
			msg := err.Error()
			var ae *temporal.ApplicationError
			if errors.As(err, &ae) {
				msg = ae.Message()
			}
			return failure(fmt.Errorf("run %s on Temporal (workflow %s): %s", name, wr.GetID(), msg))
		}
		var out runOut
		if err := json.Unmarshal(raw, &out); err != nil {
			return failure(fmt.Errorf("run %s: the workflow's result is not a run summary: %w", name, err))
		}
		out.Workflow = wr.GetID()
		if err := ranNothing(cfg, out.Summary); err != nil {
			return err
		}
		if p.json {
			return p.JSON(out)
		}
		return printRun(p, out)
	})
}

// loadConfig reads a pipeline file with the stage kinds rlpipe ships.
func loadConfig(path string, overrides []string) (*config.Config, error) {
	return config.Load(path, kinds.Registry(), overrides...)
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun/supervisor"
)

// scaleOptions are `rlpipe worker --scale`'s flags.
type scaleOptions struct {
	limits []string
	poll   time.Duration
	idle   time.Duration
}

func (o *scaleOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.limits, "scale", nil, "run MIN to MAX worker processes of environment ENV on this host, following its queue's backlog: ENV=MIN:MAX (repeat, or comma-separate)")
	fs.DurationVar(&o.poll, "scale-poll", supervisor.DefaultPoll, "with --scale: how often each queue's backlog is read")
	fs.DurationVar(&o.idle, "scale-idle", supervisor.DefaultIdleTimeout, "with --scale: how long a process runs no attempt before it is stopped")
}

// workerLaunch is what a supervised worker process is started with: the
// supervisor's own config, overrides, GPUs and Temporal flags.
type workerLaunch struct {
	file    string
	set     []string
	args    []string
	gpus    int
	gpuType string
	t       temporalOptions
}

// argv is `rlpipe worker --env env` as this process was asked to run it.
func (l workerLaunch) argv(store, level, addr, ns, env string) []string {
	a := []string{"--store", store, "--log-level", level, "worker", "-f", l.file, "--env", env, "--temporal", addr, "--namespace", ns}
	if l.gpus >= 0 {
		a = append(a, "--gpus", strconv.Itoa(l.gpus))
		if l.gpuType != "" {
			a = append(a, "--gpu-type", l.gpuType)
		}
	}
	for _, s := range l.set {
		a = append(a, "--set", s)
	}
	return append(a, l.args...)
}

// superviseWorkers is `rlpipe worker --scale`: a supervisor of worker
// processes on this host (pipeline/temporalrun/supervisor).
func superviseWorkers(cmd *cobra.Command, g *rootOptions, l workerLaunch, o scaleOptions, plan config.Plan, known map[string]bool, pid string) error {
	limits, err := supervisor.ParseScale(o.limits)
	if err != nil {
		return usagef("worker: --scale: %v", err)
	}
	envs := slices.Sorted(maps.Keys(limits))
	for _, e := range envs {
		if !known[e] {
			return usagef("worker: --scale %s: %s", e, notAnEnv(l.file, known))
		}
	}
	if o.poll <= 0 || o.idle <= 0 {
		return usagef("worker: --scale-poll %s and --scale-idle %s: use positive durations, e.g. --scale-poll 1s --scale-idle 30s", o.poll, o.idle)
	}
	exe, err := os.Executable()
	if err != nil {
		return failure(fmt.Errorf("worker --scale: find this program to start worker processes with: %w", err))
	}
	c, ns, err := l.t.dial(cmd.Context(), g)
	if err != nil {
		return err
	}
	defer c.Close()
	addr, _ := l.t.resolve(g)
	// The processes log at info at least: the supervisor counts their
	// attempts from those lines, and shows only those at its own level.
	level := min(g.logger.GetLevel(), zerolog.InfoLevel).String()
	capacity := concurrency(plan.Run, envs)
	return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
		repo, err := st.Repository(ctx)
		if err != nil {
			return failure(withOp(err, "open store %s", g.store))
		}
		var senvs []supervisor.Env
		var shown []string
		for _, e := range envs {
			q := temporalrun.Queue(repo.Name, pid, e)
			senvs = append(senvs, supervisor.Env{Name: e, Queue: q, Limits: limits[e], Capacity: capacity[e]})
			shown = append(shown, fmt.Sprintf("%s (%s, %d to %d processes, %d at once each)", e, q, limits[e].Min, limits[e].Max, capacity[e]))
		}
		fmt.Fprintf(g.env.stderr, "rlpipe worker: scaling %s on Temporal namespace %s, store %s; a process stops after %s idle; Ctrl-C stops them all\n",
			strings.Join(shown, ", "), ns, g.store, o.idle)
		err = supervisor.Run(ctx, supervisor.Options{
			Envs:    senvs,
			Backlog: supervisor.QueueBacklog{Client: c, Namespace: ns},
			Command: func(env string) *exec.Cmd {
				return exec.Command(exe, l.argv(g.store, level, addr, ns, env)...)
			},
			Poll:        o.poll,
			IdleTimeout: o.idle,
			Output:      g.env.stderr,
			Logger:      g.logger,
		})
		if errors.Is(err, supervisor.ErrCrashLoop) {
			return failure(err)
		}
		if err != nil {
			return failure(fmt.Errorf("worker --scale: %w", err))
		}
		return nil
	})
}

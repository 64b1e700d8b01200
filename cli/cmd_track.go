package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/driver"
	"github.com/rlpipe/rlpipe/trackers"
)

type trackOptions struct {
	to []string
	at string
}

func (o *trackOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.to, "to", nil, "a tracker, KIND:TARGET: tensorboard:DIR, mlflow:http://HOST:PORT or wandb:DIR (repeat for several; default: the run's tracking section)")
	fs.StringVar(&o.at, "at", "", "the ref to read the run at (default: its branch, runs-RUN)")
}

func newTrackCommand(g *rootOptions) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:   "track RUN [--to KIND:TARGET]...",
		Short: "send a run's figures to experiment trackers (TensorBoard, MLflow, W&B)",
		Long: `Send everything a run recorded to experiment trackers, from the store:
every iteration's train metrics, reward component means and health figures,
every evaluation with its interval, the config (secrets redacted), and the
commit of each step. A run sends these as it goes to the trackers of its
tracking section; a tracker that was down or slow missed some, and this
brings it level. Without --to, the trackers are the run's own tracking
section. TensorBoard gets a new event file that replaces the steps it
had; MLflow appends to the run's MLflow run (found by its rlpipe.run tag),
whose steps keep their last values, and ends it as the run stands:
FINISHED once it did its last iteration, left RUNNING while a process
holds it, else FAILED (a run that stopped early; an MLflow run already
KILLED or FAILED keeps that), at the time of its last commit. W&B
continues the run whose id is the run's name (offline unless
WANDB_API_KEY is set: a run directory under DIR/wandb that wandb sync
uploads). Credentials come from the environment only
(MLFLOW_TRACKING_TOKEN, WANDB_API_KEY).`,
		Example: `  rlpipe track arith --to tensorboard:tb && tensorboard --logdir tb
  rlpipe track arith --to mlflow:http://127.0.0.1:5000
  rlpipe track arith --to wandb:wb   # then: wandb sync wb/wandb/offline-run-*
  rlpipe track arith                 # the trackers of the run's tracking section`,
		Args: exactArgs("RUN"),
	}, func(cmd *cobra.Command, o trackOptions, args []string) error {
		var specs []trackers.Spec
		for _, to := range o.to {
			s, err := kinds.Registry().Trackers.ParseTarget(to)
			if err != nil {
				return asUsage(err)
			}
			specs = append(specs, s)
		}
		if err := artifacts.ValidateBranchName(runs.Branch(args[0])); err != nil {
			return usagef("track: %q is not a run name", args[0])
		}
		return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
			return trackFunc(ctx, st, args[0], specs, o, g.printer(cmd))
		})
	})
}

// trackOut is the JSON shape of `track`: one entry per tracker.
type trackOut struct {
	Tracker string `json:"tracker"`
	Points  int    `json:"points"`
	// Outcome is how the tracker's run was ended (trackOutcome):
	// "finished", "running" or "stopped".
	Outcome string `json:"outcome"`
}

// trackOutcome is how a back-fill ends the trackers' run of run name,
// judged at the run's branch head whatever --at reads (the tracker's run
// stands for the whole run): Running while a live process holds the run
// (that process ends it), Finished once the head has done the iterations
// its recorded config asks for, else Stopped (the run stopped early and
// the store does not say why); at the time of the head commit, the run's
// last.
func trackOutcome(ctx context.Context, st artifacts.Store, name string) (trackers.Outcome, error) {
	lock, err := pipeline.ReadLock(ctx, st, name)
	if err != nil {
		return trackers.Outcome{}, fmt.Errorf("track %s: %w", name, err)
	}
	if lock != nil && lock.Alive {
		return trackers.Outcome{Status: trackers.Running}, nil
	}
	br, err := st.GetBranch(ctx, runs.Branch(name))
	if err != nil {
		return trackers.Outcome{}, withOp(err, "track %s", name)
	}
	head, err := st.GetCommit(ctx, br.CommitID)
	if err != nil {
		return trackers.Outcome{}, withOp(err, "track %s", name)
	}
	state, err := runs.ReadState(ctx, st, br.CommitID)
	if err != nil {
		return trackers.Outcome{}, withOp(err, "track %s", name)
	}
	body, err := artifacts.ReadObject(ctx, st, br.CommitID, runs.ConfigPath)
	if err != nil {
		return trackers.Outcome{}, fmt.Errorf("track %s: read %s at %s: %w", name, runs.ConfigPath, runs.Branch(name), err)
	}
	cfg, err := config.Parse(runs.ConfigPath, body, kinds.Registry())
	if err != nil {
		return trackers.Outcome{}, fmt.Errorf("track %s: read the iterations of the config at %s: %w", name, runs.Branch(name), err)
	}
	o := trackers.Outcome{Status: trackers.Stopped, Time: head.CreationDate}
	if state != nil && state.Iteration >= cfg.Iterations {
		o.Status = trackers.Finished
	}
	return o, nil
}

func trackFunc(ctx context.Context, st artifacts.Store, name string, specs []trackers.Spec, o trackOptions, p printer) error {
	ref := o.at
	if ref == "" {
		ref = runs.Branch(name)
	}
	if _, err := st.ResolveRef(ctx, ref); errors.Is(err, artifacts.ErrNotFound) {
		return explain(err, "track: no run %q in this store: `rlpipe status` lists the runs", name)
	} else if err != nil {
		return fmt.Errorf("track %s: %w", name, err)
	}
	run, err := trackers.ReadRun(ctx, st, name, ref)
	if err != nil {
		return err
	}
	cfg, perr := config.Parse(runs.ConfigPath, run.Config, kinds.Registry())
	if perr == nil {
		// The trackers get the effective config, defaults filled in, as
		// the live run's did; a config this rlpipe cannot parse goes as
		// recorded.
		if run, err = driver.TrackerRun(cfg, name, run.ConfigHash); err != nil {
			return err
		}
	}
	end, err := trackOutcome(ctx, st, name)
	if err != nil {
		return err
	}
	if len(specs) == 0 {
		if perr != nil {
			return fmt.Errorf("track %s: read the run's tracking section: %w", name, perr)
		}
		for _, t := range cfg.Tracking {
			specs = append(specs, t.Spec())
		}
		if len(specs) == 0 {
			return usagef("track: run %s has no tracking section: name a tracker with --to KIND:TARGET", name)
		}
	}
	var out []trackOut
	for _, s := range specs {
		t, err := kinds.Registry().Trackers.Open(s)
		if err != nil {
			return asUsage(err)
		}
		n, err := trackers.Backfill(ctx, st, run, ref, t, end)
		if err != nil {
			return fmt.Errorf("track %s --to %s: %w", name, s, err)
		}
		out = append(out, trackOut{Tracker: s.String(), Points: n, Outcome: end.Status.String()})
		if !p.json {
			fmt.Fprintf(p.w, "%s: %d points of run %s (%s)\n", s, n, name, end.Status)
		}
	}
	if p.json {
		return p.JSON(out)
	}
	return nil
}

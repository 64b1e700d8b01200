package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun"
)

// TemporalOptions are how a driver worker runs the runs Temporal hands it.
type TemporalOptions struct {
	// Client is a connected Temporal client; the run's tasks become
	// workflows on the queues of their environments.
	Client client.Client
	// Load reads the pipeline config at the path the run was started with
	// (temporalrun.RunInput.Config) on this host.
	Load func(path string) (*config.Config, error)
	// Logger is the store's and the executor's log, and each run's
	// Options.Logger and EventLogger.
	Logger zerolog.Logger
	// Run runs each run's loop; nil is Run. A caller that shows progress
	// passes a function that adds its hooks to the Options it is given
	// and calls Run with them.
	Run func(ctx context.Context, st artifacts.Store, cfg *config.Config, o Options) (Summary, error)
}

// Temporal is the driver a driver worker serves (temporalrun.WorkerOptions.Drive):
// for each run workflow it loads the run's config, refuses one whose hash
// is not the run's, opens the run's store and runs the loop as Run does
// with the Temporal executor, returning the Summary as JSON. Errors that
// another attempt on another host cannot fix are pipeline.Permanent.
func Temporal(o TemporalOptions) temporalrun.Driver {
	run := o.Run
	if run == nil {
		run = Run
	}
	return func(ctx context.Context, in temporalrun.RunInput) (json.RawMessage, error) {
		cfg, err := o.Load(in.Config)
		if err != nil {
			return nil, pipeline.Permanent(fmt.Errorf("driver: %w (every driver host needs the pipeline at the path the run was started with)", err))
		}
		if in.NoOverlap {
			cfg.Overlap.MaxStaleness = 0
		}
		hash, err := cfg.Hash()
		if err != nil {
			return nil, pipeline.Permanent(err)
		}
		if hash != in.ConfigHash {
			return nil, pipeline.Permanent(fmt.Errorf("%w: %s here has config hash %.12s but run %s was started with %.12s; run every host from the same checkout", pipeline.ErrConfig, in.Config, hash, in.Run, in.ConfigHash))
		}
		st, err := artifacts.Open(ctx, in.Store, &artifacts.Options{Logger: o.Logger})
		if err != nil {
			return nil, fmt.Errorf("driver: open store %s: %w", in.Store, err)
		}
		defer st.Close()
		pid, err := PipelineID(cfg)
		if err != nil {
			return nil, pipeline.Permanent(err)
		}
		ex, err := temporalrun.NewExecutor(temporalrun.ExecutorOptions{Client: o.Client, Repository: in.Repository, Pipeline: pid, Store: st, Heartbeat: in.Heartbeat, Logger: o.Logger})
		if err != nil {
			return nil, pipeline.Permanent(err)
		}
		out, err := run(ctx, st, cfg, Options{Name: in.Run, NoCache: in.NoCache, Executor: ex, Logger: o.Logger, EventLogger: o.Logger})
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
}

// PipelineID names a pipeline's tasks in its queue names
// (temporalrun.Queue): a short hash of its config without what only the
// driver reads (the number of iterations, overlap), so that a worker
// serves exactly the pipeline it was started from, and a run extended or
// run on-policy needs no restart of its workers.
func PipelineID(cfg *config.Config) (string, error) {
	c := *cfg
	c.Iterations, c.Overlap.MaxStaleness = 0, 0
	h, err := c.Hash()
	if err != nil {
		return "", err
	}
	h = strings.TrimPrefix(h, "sha256:")
	return h[:12], nil
}

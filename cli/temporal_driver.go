package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/driver"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun"
)

// temporalDriverOptions are how a driver worker runs the runs Temporal
// hands it.
type temporalDriverOptions struct {
	// client is a connected Temporal client; the run's tasks become
	// workflows on the queues of their environments.
	client client.Client
	// load reads the pipeline config at the path the run was started with
	// (temporalrun.RunInput.Config) on this host, with the run's overrides.
	load func(path string, overrides []string) (*config.Config, error)
	// logger is the store's and the executor's log, and each run's
	// driver.Options.Logger and EventLogger.
	logger zerolog.Logger
	// run runs each run's loop; nil is driver.Run. The command passes one
	// that adds its display's hooks to the Options it is given.
	run func(ctx context.Context, st artifacts.Store, cfg *config.Config, o driver.Options) (driver.Summary, error)
}

// temporalDriver is the driver a driver worker serves
// (temporalrun.WorkerOptions.Drive): for each run workflow it loads the
// run's config, refuses one whose hash is not the run's, opens the run's
// store and runs driver.Run with the Temporal executor, returning the
// Summary as JSON. Errors that another attempt on another host cannot fix
// are pipeline.Permanent.
//
// It lives in the command, not in pipeline/driver, because it builds the
// Temporal executor: only pipeline/temporalrun and the command link
// Temporal (internal/layers), and the driver takes its executor as a value.
func temporalDriver(o temporalDriverOptions) temporalrun.Driver {
	run := o.run
	if run == nil {
		run = driver.Run
	}
	return func(ctx context.Context, in temporalrun.RunInput) (json.RawMessage, error) {
		cfg, err := o.load(in.Config, in.Overrides)
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
		st, err := artifacts.Open(ctx, in.Store, &artifacts.Options{Logger: o.logger})
		if err != nil {
			return nil, fmt.Errorf("driver: open store %s: %w", in.Store, err)
		}
		defer st.Close()
		pid, err := driver.PipelineID(cfg)
		if err != nil {
			return nil, pipeline.Permanent(err)
		}
		ex, err := temporalrun.NewExecutor(temporalrun.ExecutorOptions{Client: o.client, Repository: in.Repository, Pipeline: pid, Store: st, Heartbeat: in.Heartbeat, Logger: o.logger})
		if err != nil {
			return nil, pipeline.Permanent(err)
		}
		out, err := run(ctx, st, cfg, driver.Options{Name: in.Run, NoCache: in.NoCache, AllowConfigChange: in.AllowConfigChange, Executor: ex, Logger: o.logger, EventLogger: o.logger})
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
}

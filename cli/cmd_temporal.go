package cli

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/pipeline/temporalrun"
)

// TemporalDevServer starts a Temporal dev server on address (HOST:PORT)
// with its state in dbFile (memory when empty) and returns the address it
// listens on and how to stop it. cli/rlpipe passes one built on
// pipeline/temporalrun/devserver (WithTemporalDevServer), so that only the
// binary links Temporal's server, not every test of this package.
type TemporalDevServer func(address, dbFile string) (listening string, stop func() error, err error)

// Option is an extension of Main.
type Option func(*environ)

// WithTemporalDevServer gives `rlpipe temporal dev` its server.
func WithTemporalDevServer(start TemporalDevServer) Option {
	return func(e *environ) { e.temporalDev = start }
}

// errNoDevServer is `rlpipe temporal dev` in a program built without one.
var errNoDevServer = errors.New("this program was built without Temporal's dev server")

type temporalDevOptions struct {
	addr   string
	dbFile string
}

func (o *temporalDevOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.addr, "addr", temporalrun.DefaultAddress, "frontend HOST:PORT, on loopback (the dev server has no authentication); PORT 0 picks a free one")
	fs.StringVar(&o.dbFile, "db-file", "", "keep the server's state in this SQLite file, so runs survive a restart (default: in memory)")
}

// newTemporalCommand builds `rlpipe temporal`.
func newTemporalCommand(g *rootOptions) *cobra.Command {
	return newGroupCommand("temporal", "Temporal helpers for the --executor temporal mode", newTemporalDevCommand(g))
}

// newTemporalDevCommand builds `rlpipe temporal dev`.
func newTemporalDevCommand(g *rootOptions) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:   "dev [--addr 127.0.0.1:7233] [--db-file FILE]",
		Short: "run a Temporal dev server in this process, for workers and runs on this machine",
		Long: `Run Temporal's server (the one rlpipe's own tests start) in this process:
the frontend on --addr, the namespace "default" registered, state in memory
or in --db-file. It is what ` + "`temporal server start-dev`" + ` gives, without
installing Temporal's CLI, and without its Web UI. It listens on loopback
only: for workers on other hosts run a Temporal cluster (docs/DEPLOY.md).
Stop it with Ctrl-C.`,
		Example: `  rlpipe temporal dev &
  rlpipe worker -f pipeline.yaml --env sample,generate,reward,advantages,train,eval,health &
  rlpipe run -f pipeline.yaml --executor temporal
  rlpipe temporal dev --addr 127.0.0.1:7300 --db-file .temporal/dev.db`,
		Args: exactArgs(),
	}, func(cmd *cobra.Command, o temporalDevOptions, _ []string) error {
		start := g.env.temporalDev
		if start == nil {
			return failure(fmt.Errorf("temporal dev: %w; run the rlpipe command (go build ./cli/rlpipe), or Temporal's CLI: temporal server start-dev", errNoDevServer))
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		addr, stopServer, err := start(o.addr, o.dbFile)
		if err != nil {
			return failure(fmt.Errorf("temporal dev: %w", err))
		}
		state := "in memory, gone when it stops"
		if o.dbFile != "" {
			state = "in " + o.dbFile
		}
		p := g.printer(cmd)
		if p.json {
			err = p.JSON(map[string]any{"address": addr, "namespace": temporalrun.DefaultNamespace, "db_file": o.dbFile})
		} else {
			flag := ""
			if addr != temporalrun.DefaultAddress {
				flag = " --temporal " + addr
			}
			_, err = fmt.Fprintf(p.w, "Temporal dev server on %s, namespace %s, state %s (Ctrl-C stops it)\nworkers and runs use it with: rlpipe worker ...%s; rlpipe run --executor temporal%s\n",
				addr, temporalrun.DefaultNamespace, state, flag, flag)
		}
		if err == nil {
			<-ctx.Done()
		}
		if serr := stopServer(); serr != nil && err == nil {
			err = failure(fmt.Errorf("temporal dev: stop the server on %s: %w", addr, serr))
		}
		if err == nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "Temporal dev server on %s stopped\n", addr)
		}
		return err
	})
}

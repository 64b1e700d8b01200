package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/ui"
)

type uiOptions struct {
	addr string
}

func (o *uiOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.addr, "addr", ui.DefaultAddr, "address to listen on; any address but loopback needs "+ui.TokenEnv)
}

// newUICommand builds `rlpipe ui`.
func newUICommand(g *rootOptions) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:   "ui [--addr 127.0.0.1:8080]",
		Short: "browse runs, iterations, branches and tables in a web page",
		Long: `Serve a small web UI over the store: the runs with their iterations, task
timings, train metrics and evaluations as charts that update as new
iterations commit; each iteration's tasks and the artifacts it wrote;
branches, history and files; and a browser for any Parquet table. It only
reads the store, so it can watch a run another process is writing.

The UI listens on loopback by default. Bound to any other address it needs
a token, read from ` + ui.TokenEnv + `: open the page once as
http://HOST:PORT/?token=TOKEN (the browser keeps it in a cookie), or send
Authorization: Bearer TOKEN. Stop it with Ctrl-C. See docs/UI.md.`,
		Example: `  rlpipe ui
  rlpipe ui --addr 127.0.0.1:9090
  RLPIPE_UI_TOKEN=$(openssl rand -hex 16) rlpipe ui --addr 0.0.0.0:8080`,
		Args: exactArgs(),
	}, func(cmd *cobra.Command, o uiOptions, _ []string) error {
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		token := g.env.getenv(ui.TokenEnv)
		return g.withStore(cmd, func(_ context.Context, st artifacts.Store) error {
			return uiServe(ctx, st, o, token, *zerolog.Ctx(cmd.Context()), g.printer(cmd))
		})
	})
}

// uiServe serves the UI until ctx ends.
func uiServe(ctx context.Context, st artifacts.Store, o uiOptions, token string, log zerolog.Logger, p printer) error {
	srv, err := ui.New(st, &ui.Options{Addr: o.addr, Token: token, Logger: log, EffectiveConfig: effectiveKeys})
	if err != nil {
		return failure(err)
	}
	l, err := srv.Listen(ctx)
	if err != nil {
		return failure(err)
	}
	open := "http://" + l.Addr().String() + "/"
	if token != "" {
		open += "?token=$" + ui.TokenEnv
	}
	if p.json {
		if err := p.JSON(map[string]string{"url": "http://" + l.Addr().String() + "/"}); err != nil {
			l.Close()
			return err
		}
	} else if err := p.Printf("serving the rlpipe UI on %s (Ctrl-C stops it)\n", open); err != nil {
		l.Close()
		return err
	}
	if err := srv.Serve(ctx, l); err != nil {
		return failure(err) // already "ui: serve ADDR: …"
	}
	return nil
}

// effectiveKeys is a run's recorded config parsed with this rlpipe's
// kinds, every default filled in, flattened to dotted keys: what the UI's
// run view shows (ui.Options.EffectiveConfig).
func effectiveKeys(recorded []byte) (map[string]string, error) {
	cfg, err := config.Parse(runs.ConfigPath, recorded, kinds.Registry())
	if err != nil {
		return nil, err
	}
	return cfg.EffectiveKeys()
}

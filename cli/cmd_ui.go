package cli

import (
	"context"
	"fmt"
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
	"github.com/rlpipe/rlpipe/policy/hftokenizer"
	"github.com/rlpipe/rlpipe/policy/openai"
	"github.com/rlpipe/rlpipe/ui"
)

type uiOptions struct {
	addr      string
	tokenizer string
}

func (o *uiOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.addr, "addr", ui.DefaultAddr, "address to listen on; any address but loopback needs "+ui.TokenEnv)
	fs.StringVar(&o.tokenizer, "tokenizer", "", "a tokenizer.json (or a Hugging Face model directory holding one) that spells the episodes of openai policies; overrides their tokenizer key")
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
Authorization: Bearer TOKEN. Stop it with Ctrl-C. See docs/UI.md.

An episode's tokens are spelled for the embedded models; for an openai
policy (vLLM, any OpenAI-compatible server) with its tokenizer key, or the
tokenizer --tokenizer names (a tokenizer.json or a Hugging Face model
directory). Without either the episode shows token ids.`,
		Example: `  rlpipe ui
  rlpipe ui --addr 127.0.0.1:9090
  rlpipe ui --tokenizer ~/models/Qwen2.5-0.5B-Instruct
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
	tokenizer, err := uiTokenizer(o.tokenizer)
	if err != nil {
		return failure(err)
	}
	srv, err := ui.New(st, &ui.Options{Addr: o.addr, Token: token, Logger: log, EffectiveConfig: effectiveKeys, Tokenizer: tokenizer})
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

// uiTokenizer is what spells an openai policy's episodes
// (ui.Options.Tokenizer): the tokenizer flag names, read now; else the one
// the run's recorded config names in the openai policy's tokenizer key,
// a relative path taken from the directory rlpipe ui runs in (the
// recorded config does not say where its file was).
func uiTokenizer(flag string) (func(recorded []byte) (ui.Speller, error), error) {
	if flag != "" {
		tok, err := hftokenizer.Load(flag)
		if err != nil {
			return nil, fmt.Errorf("ui --tokenizer: %w: name a tokenizer.json or a Hugging Face model directory holding one", err)
		}
		return func([]byte) (ui.Speller, error) { return tok, nil }, nil
	}
	return func(recorded []byte) (ui.Speller, error) {
		if recorded == nil {
			return nil, nil
		}
		// A config this rlpipe cannot parse is reported by the run view.
		cfg, err := config.Parse(runs.ConfigPath, recorded, kinds.Registry())
		if err != nil || cfg.Policy == nil {
			return nil, nil
		}
		po, ok := cfg.Policy.Options.(*openai.PolicyOptions)
		if !ok || po.Tokenizer == "" {
			return nil, nil
		}
		tok, err := hftokenizer.Load(po.Tokenizer)
		if err != nil {
			return nil, fmt.Errorf("policy.tokenizer of %s: %w: fix the key (relative paths are taken from where rlpipe ui runs), or pass rlpipe ui --tokenizer PATH", runs.ConfigPath, err)
		}
		return tok, nil
	}, nil
}

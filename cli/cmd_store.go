package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
)

// newStoreCommand builds `rlpipe store`.
func newStoreCommand(g *rootOptions) *cobra.Command {
	return newGroupCommand("store", "share the store with other processes", newStoreServeCommand(g))
}

type storeServeOptions struct {
	addr       string
	repository string
	faults     string
}

func (o *storeServeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.addr, "addr", storeserver.DefaultAddr, "address to listen on; any address but loopback needs "+storeserver.EnvAccessKeyID+" and "+storeserver.EnvSecretAccessKey)
	fs.StringVar(&o.repository, "repository", "", "name workers open the store by, lakefs://NAME (default: the store's own name, made a valid repository name)")
	// For tests of rlpipe itself (docs/DEPLOY.md): hidden from help.
	fs.StringVar(&o.faults, "faults", "", "behave as a real lakeFS server can, for tests: commit-window=DURATION, miss-staged-once, md5-checksums")
	_ = fs.MarkHidden("faults")
}

// newStoreServeCommand builds `rlpipe store serve`.
func newStoreServeCommand(g *rootOptions) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:   "serve [--addr 127.0.0.1:8001] [--repository NAME]",
		Short: "serve the store over the lakeFS API so that other processes share it",
		Long: `Serve the store --store names over the part of the lakeFS REST API that rlpipe's
lakefs:// backend speaks, so that pipeline workers on this machine or on the
network share one embedded store: a worker sets LAKECTL_SERVER_ENDPOINT_URL to
the printed endpoint and uses --store lakefs://NAME (or RLPIPE_STORE). Objects
stream both ways and keep the store's checksums.

The server listens on loopback by default and then needs no credentials.
Bound to any other address it requires them, read from
` + storeserver.EnvAccessKeyID + ` and ` + storeserver.EnvSecretAccessKey + `; workers send the same values
as LAKECTL_CREDENTIALS_ACCESS_KEY_ID and LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY.
The values are never printed. Stop it with Ctrl-C.`,
		Example: `  rlpipe store serve
  rlpipe --store /data/runs store serve --addr 127.0.0.1:9001 --repository runs
  export RLPIPE_STORE_ACCESS_KEY_ID=$(openssl rand -hex 8) RLPIPE_STORE_SECRET_ACCESS_KEY=$(openssl rand -hex 16)
  rlpipe store serve --addr 0.0.0.0:8001`,
		Args: exactArgs(),
	}, func(cmd *cobra.Command, o storeServeOptions, _ []string) error {
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		creds := storeCredentials{key: g.env.getenv(storeserver.EnvAccessKeyID), secret: g.env.getenv(storeserver.EnvSecretAccessKey)}
		return g.withStore(cmd, func(_ context.Context, st artifacts.Store) error {
			return storeServe(ctx, st, g.store, o, creds, *zerolog.Ctx(cmd.Context()), g.printer(cmd))
		})
	})
}

// storeCredentials are the server's; their values are never printed.
type storeCredentials struct{ key, secret string }

func (c storeCredentials) String() string { return "storeCredentials{[redacted]}" }

// GoString keeps the values out of %#v too.
func (c storeCredentials) GoString() string { return c.String() }

// storeServe serves st until ctx ends.
func storeServe(ctx context.Context, st artifacts.Store, storeURI string, o storeServeOptions, creds storeCredentials, log zerolog.Logger, p printer) error {
	name := o.repository
	if name == "" {
		info, err := st.Repository(ctx)
		if err != nil {
			return failure(fmt.Errorf("store serve: describe store %s: %w", storeURI, err))
		}
		name = repositoryName(info.Name)
	}
	faults, err := storeserver.ParseFaults(o.faults)
	if err != nil {
		return usagef("store serve: --faults: %v", err)
	}
	if faults != (storeserver.Faults{}) {
		log.Warn().Str("faults", faults.String()).Msg("serving with faults injected, for tests: reads of staged objects may answer 404")
	}
	srv, err := storeserver.New(ctx, st, &storeserver.Options{
		Addr: o.addr, AccessKeyID: creds.key, SecretAccessKey: creds.secret, Repository: name, Logger: log, Faults: faults,
	})
	if err != nil {
		return failure(fmt.Errorf("store serve: %w", err))
	}
	l, err := srv.Listen(ctx)
	if err != nil {
		return failure(fmt.Errorf("store serve: %w", err))
	}
	endpoint := endpointOf(l.Addr())
	if err := printServing(p, storeURI, srv, endpoint); err != nil {
		l.Close()
		return err
	}
	if err := srv.Serve(ctx, l); err != nil {
		return failure(fmt.Errorf("store serve: %w", err))
	}
	return nil
}

// printServing tells how a worker reaches the server: the variables to
// set, naming the credential variables but never their values.
func printServing(p printer, storeURI string, srv *storeserver.Server, endpoint string) error {
	store := "lakefs://" + srv.Repository()
	if p.json {
		out := map[string]any{
			"store": storeURI, "repository": srv.Repository(), "endpoint": endpoint, "auth": srv.RequiresAuth(),
			"env": map[string]string{lakefs.EnvEndpoint: endpoint, EnvStore: store},
		}
		if srv.RequiresAuth() {
			out["credentials_from"] = map[string]string{
				lakefs.EnvAccessKeyID: storeserver.EnvAccessKeyID, lakefs.EnvSecretAccessKey: storeserver.EnvSecretAccessKey,
			}
		}
		return p.JSON(out)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "serving store %s as %s on %s (Ctrl-C stops it)\n", storeURI, store, endpoint)
	b.WriteString("a worker uses it with:\n")
	fmt.Fprintf(&b, "  export %s=%s\n", lakefs.EnvEndpoint, shellQuote(endpoint))
	fmt.Fprintf(&b, "  export %s=%s\n", EnvStore, shellQuote(store))
	if srv.RequiresAuth() {
		fmt.Fprintf(&b, "  export %s=\"$%s\"\n", lakefs.EnvAccessKeyID, storeserver.EnvAccessKeyID)
		fmt.Fprintf(&b, "  export %s=\"$%s\"\n", lakefs.EnvSecretAccessKey, storeserver.EnvSecretAccessKey)
		fmt.Fprintf(&b, "(the credentials are the values of %s and %s on this machine)\n", storeserver.EnvAccessKeyID, storeserver.EnvSecretAccessKey)
	} else {
		b.WriteString("(no credentials: only processes on this machine can reach it)\n")
	}
	return p.Printf("%s", b.String())
}

// endpointOf is the URL workers use for a bound address; an address of
// every interface is named by this machine's host name.
func endpointOf(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "HOST"
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// repositoryName makes a store's name a repository name clients accept:
// lower case, runs of other characters as one '-', no '-' at either end
// (the embedded store ./.rlpipe is served as "rlpipe"). A name that is
// still not valid is returned as it is, for the server to refuse with a
// message naming --repository.
func repositoryName(name string) string {
	if artifacts.ValidateRepositoryName(name) == nil {
		return name
	}
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	if s := strings.Trim(b.String(), "-"); artifacts.ValidateRepositoryName(s) == nil {
		return s
	}
	return name
}

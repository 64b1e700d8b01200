package embedded

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
	"github.com/rlpipe/rlpipe/policy/server"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// Kind is the backend's name in policy.Spec and pipeline.yaml.
const Kind = "embedded"

// Ways of reaching the model, PolicyOptions.Serve.
const (
	ServeInProcess = "inprocess" // call the model directly (the default)
	ServeHTTP      = "http"      // serve it on 127.0.0.1 and sample over HTTP
)

// ModelTinyArith names the weights the binary ships.
const ModelTinyArith = "tiny-arith"

// Backend opens embedded policies: the value cli/kinds registers.
var Backend policy.Backend = backend{}

type backend struct{}

func (backend) Name() string { return Kind }

func (backend) Options() any { return &PolicyOptions{} }
func (backend) Open(ctx context.Context, s policy.Spec) (*policy.Opened, error) {
	return Open(ctx, s)
}
func (backend) Noun() string { return "the embedded model" }

// PolicyOptions are the embedded backend's keys of the policy section.
type PolicyOptions struct {
	// Serve is inprocess (default) or http.
	Serve string `yaml:"serve,omitempty"`
}

// Check checks the way of serving and the model.
func (o *PolicyOptions) Check(c policy.Checker, model string) {
	if o.Serve != "" && o.Serve != ServeInProcess && o.Serve != ServeHTTP {
		c.Fail("serve", "use inprocess or http", "%s: unknown way %q", c.Path("serve"), o.Serve)
	}
	if model != "" && !Shipped(model) && !strings.HasSuffix(model, ".safetensors") && !isDir(model) {
		c.Fail("model", "use "+ShippedNames()+", a .safetensors file or a model directory `rlpipe policy export` wrote",
			"%s: %q is neither a shipped model, a .safetensors file nor a directory", c.Path("model"), model)
	}
}

// The embedded model computes evaluation's exact pass@1 (Opened.Model).
var _ policy.ExactScorer = (*tiny.Model)(nil)

// Open opens the embedded model a spec names. Served over HTTP, it starts
// `rlpipe policy serve`'s server on 127.0.0.1 and returns a client of it;
// Close stops the server.
func Open(ctx context.Context, s policy.Spec) (*policy.Opened, error) {
	var po PolicyOptions
	if p, ok := s.Options.(*PolicyOptions); ok && p != nil {
		po = *p
	}
	if po.Serve != "" && po.Serve != ServeInProcess && po.Serve != ServeHTTP {
		return nil, fmt.Errorf("policy: unknown way of serving %q (use %s or %s)", po.Serve, ServeInProcess, ServeHTTP)
	}
	model := s.Model
	if model != "" && !Shipped(model) && !filepath.IsAbs(model) && s.Dir != "" {
		model = filepath.Join(s.Dir, model)
	}
	m, err := Load(model)
	if err != nil {
		return nil, err
	}
	in := tiny.NewPolicy(m)
	o := &policy.Opened{Policy: in, Identity: m.Version(), Model: m}
	if po.Serve == ServeHTTP {
		c, addr, stop, err := ServeLoopback(ctx, in, o.Identity, s.Logger)
		if err != nil {
			return nil, err
		}
		o.Policy, o.Addr, o.Stop = c, addr, stop
	}
	return o, nil
}

// shipped are the models whose weights the binary ships, by name.
var shipped = map[string]func() (*tiny.Model, error){
	ModelTinyArith:      tiny.Embedded,
	tiny.ModelTinyChain: tiny.EmbeddedChain,
	tiny.ModelTinyRG:    tiny.EmbeddedRG,
	tiny.ModelTinyTool:  tiny.EmbeddedTool,
}

// Shipped reports whether model names weights the binary ships:
// tiny-arith, tiny-chain, tiny-rg or tiny-tool.
func Shipped(model string) bool { return shipped[model] != nil }

// ShippedNames lists the shipped models' names, sorted, for messages:
// "tiny-arith, tiny-chain, tiny-rg, tiny-tool".
func ShippedNames() string { return strings.Join(slices.Sorted(maps.Keys(shipped)), ", ") }

// Load loads the shipped weights ("" or ModelTinyArith, tiny.ModelTinyChain,
// tiny.ModelTinyRG or tiny.ModelTinyTool), a safetensors file, or a Hugging Face model
// directory of a Llama the engine runs (tiny.LoadHF: what `rlpipe policy
// export` writes).
func Load(model string) (*tiny.Model, error) {
	if model == "" {
		model = ModelTinyArith
	}
	if load := shipped[model]; load != nil {
		m, err := load()
		if err != nil {
			return nil, fmt.Errorf("policy: the shipped %s weights: %w", model, err)
		}
		return m, nil
	}
	load := tiny.Load
	if isDir(model) {
		load = tiny.LoadHF
	}
	m, err := load(model)
	if err != nil {
		return nil, fmt.Errorf("policy: load %s: %w", model, err)
	}
	return m, nil
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// ServeLoopback serves p on 127.0.0.1 (a free port) and returns a client
// of it, the address, and a function that stops the server (safe to call
// more than once).
func ServeLoopback(ctx context.Context, p policy.Policy, model string, log zerolog.Logger) (*openai.Client, string, func() error, error) {
	srv, err := server.New(p, &server.Options{Model: model, Addr: "127.0.0.1:0", Logger: log})
	if err != nil {
		return nil, "", nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l, err := srv.Listen(sctx)
	if err != nil {
		cancel()
		return nil, "", nil, err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, l) }()
	addr := l.Addr().(*net.TCPAddr).String()
	c, err := openai.New(&openai.Options{Endpoints: []string{"http://" + addr}, Model: model, Logger: log})
	if err != nil {
		cancel()
		<-done
		return nil, "", nil, err
	}
	// Once: a second stop would wait on done forever.
	stop := sync.OnceValue(func() error {
		c.Close()
		cancel()
		return <-done
	})
	return c, addr, stop, nil
}

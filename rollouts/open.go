package rollouts

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
	"github.com/rlpipe/rlpipe/policy/server"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// Policy kinds and ways of serving the embedded model, as in pipeline.yaml.
const (
	KindEmbedded   = "embedded"
	KindOpenAI     = "openai"
	ServeInProcess = "inprocess"
	ServeHTTP      = "http"
	// ModelTinyArith names the weights the binary ships.
	ModelTinyArith = "tiny-arith"
)

// Spec says which policy to open.
type Spec struct {
	Kind string
	// Model: embedded — ModelTinyArith ("" too) or a safetensors path;
	// openai — the served base model.
	Model string
	// Serve: embedded — ServeInProcess ("" too) or ServeHTTP.
	Serve string
	// openai only.
	Endpoints   []string
	APIKey      string
	Concurrency int
	Timeout     time.Duration
	Retries     int
	Logger      zerolog.Logger
}

// Opened is an open policy: what a rollout task samples from.
type Opened struct {
	Policy policy.Policy
	// Identity names the base model for cache keys and policy versions;
	// it is the same in process and over HTTP, whose samples agree.
	Identity string
	// Addr is the loopback address the embedded model is served on
	// (ServeHTTP only).
	Addr string
	// Embedded is the embedded model (nil for openai policies).
	Embedded *tiny.Model
	close    func() error
}

// Close stops what Open started (the loopback server). It may be called
// more than once.
func (o *Opened) Close() error {
	if o == nil || o.close == nil {
		return nil
	}
	return o.close()
}

// Open opens the policy a spec names. For an embedded model served over
// HTTP it starts `rlpipe policy serve`'s server on 127.0.0.1 and returns a
// client of it; Close stops the server.
func Open(ctx context.Context, s Spec) (*Opened, error) {
	switch s.Kind {
	case KindEmbedded:
		if s.Serve != "" && s.Serve != ServeInProcess && s.Serve != ServeHTTP {
			return nil, fmt.Errorf("policy: unknown way of serving %q (use %s or %s)", s.Serve, ServeInProcess, ServeHTTP)
		}
		m, err := LoadEmbedded(s.Model)
		if err != nil {
			return nil, err
		}
		in := tiny.NewPolicy(m)
		o := &Opened{Policy: in, Identity: m.Version(), Embedded: m}
		if s.Serve == ServeHTTP {
			c, addr, stop, err := ServeLoopback(ctx, in, o.Identity, s.Logger)
			if err != nil {
				return nil, err
			}
			o.Policy, o.Addr, o.close = c, addr, stop
		}
		return o, nil
	case KindOpenAI:
		if s.Model == "" || len(s.Endpoints) == 0 {
			return nil, errors.New("policy: an openai policy needs a model and endpoints")
		}
		c, err := openai.New(&openai.Options{Endpoints: s.Endpoints, Model: s.Model, APIKey: s.APIKey,
			Concurrency: s.Concurrency, Timeout: s.Timeout, Retries: s.Retries, Logger: s.Logger})
		if err != nil {
			return nil, fmt.Errorf("policy: %w", err)
		}
		return &Opened{Policy: c, Identity: s.Model, close: c.Close}, nil
	}
	return nil, fmt.Errorf("policy: unknown kind %q (use %s or %s)", s.Kind, KindEmbedded, KindOpenAI)
}

// LoadEmbedded loads the shipped weights ("" or ModelTinyArith) or a
// safetensors file.
func LoadEmbedded(model string) (*tiny.Model, error) {
	if model == "" || model == ModelTinyArith {
		m, err := tiny.Embedded()
		if err != nil {
			return nil, fmt.Errorf("policy: the shipped %s weights: %w", ModelTinyArith, err)
		}
		return m, nil
	}
	m, err := tiny.Load(model)
	if err != nil {
		return nil, fmt.Errorf("policy: load %s: %w", model, err)
	}
	return m, nil
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

package openai

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/internal/loopback"
	"github.com/rlpipe/rlpipe/policy"
)

// Kind is the backend's name in policy.Spec and pipeline.yaml: any server
// of the OpenAI API (vLLM, SGLang, llama.cpp).
const Kind = "openai"

// Backend opens openai policies: the value cli/kinds registers.
var Backend policy.Backend = backend{}

type backend struct{}

func (backend) Name() string { return Kind }

func (backend) Options() any { return &PolicyOptions{} }
func (backend) Noun() string { return "an openai policy" }

// PolicyOptions are the openai backend's keys of the policy section.
type PolicyOptions struct {
	// Endpoints are the servers' base URLs, balanced.
	Endpoints []string `yaml:"endpoints,omitempty"`
	// KeyEnv names the environment variable that holds the API key; the
	// key itself never enters the config.
	KeyEnv string `yaml:"key_env,omitempty"`
	// AdapterRoot is a directory the servers can read adapters from (a
	// shared mount). The servers read an adapter's files at load time and
	// may read them again whenever they like (vLLM reloads an adapter its
	// LoRA cache evicted), so the copy stays there until it is unloaded.
	// Empty is policy.LocalAdapterRoot, which only a server on this
	// machine can read: endpoints elsewhere need adapter_root.
	AdapterRoot string `yaml:"adapter_root,omitempty"`
	// Concurrency bounds requests in flight per endpoint.
	Concurrency int `yaml:"concurrency,omitempty"`
	// Timeout bounds one HTTP attempt.
	Timeout time.Duration `yaml:"timeout,omitempty"`
	// Retries is how many times a failing request is retried.
	Retries int `yaml:"retries,omitempty"`
	// Tokenizer is the served model's tokenizer.json, or a Hugging Face
	// model directory holding one: `rlpipe ui` spells the episodes'
	// tokens with it (policy/hftokenizer). Only the UI reads it; it is not
	// part of the policy's identity, a version or a cache key.
	Tokenizer string `yaml:"tokenizer,omitempty"`
}

var reEnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Check checks the model, the endpoints and the key's variable.
func (o *PolicyOptions) Check(c policy.Checker, model string) {
	if model == "" {
		c.Fail("", "e.g. model: Qwen/Qwen2.5-0.5B-Instruct", "%s: an openai policy needs model (the served base model)", c.Path(""))
	}
	if len(o.Endpoints) == 0 {
		c.Fail("", "e.g. endpoints: [http://127.0.0.1:8000]", "%s: an openai policy needs endpoints", c.Path(""))
	}
	for i, e := range o.Endpoints {
		key := fmt.Sprintf("endpoints[%d]", i)
		if u, err := url.Parse(e); err == nil && u.User != nil {
			// The config is recorded as run/config.yaml: a password here
			// would be stored. Name the URL without it.
			c.Fail(key, "put the key in a variable and name it in key_env", "%s: %s carries credentials", c.Path(key), u.Redacted())
		} else if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
			c.Fail(key, "e.g. http://127.0.0.1:8000", "%s: %q is not an http(s) URL", c.Path(key), e)
		}
	}
	if o.AdapterRoot == "" {
		for i, e := range o.Endpoints {
			if !onThisMachine(e) {
				key := fmt.Sprintf("endpoints[%d]", i)
				c.Fail(key, "set policy.adapter_root to a directory this machine and the server both mount, at the same path",
					"%s: %s is not on this machine, and its server reads each adapter rlpipe trains from a path: policy.adapter_root must name a directory it shares with this machine",
					c.Path(key), shownURL(e))
				break
			}
		}
	}
	if o.KeyEnv != "" && !reEnvName.MatchString(o.KeyEnv) {
		c.Fail("key_env", "name the variable, e.g. OPENAI_API_KEY", "%s: %q is not a variable name", c.Path("key_env"), o.KeyEnv)
	}
	if o.Concurrency < 0 || o.Timeout < 0 || o.Retries < 0 {
		c.Fail("", "", "%s: concurrency, timeout and retries cannot be negative", c.Path(""))
	}
}

// Open is a client of the spec's endpoints, whose identity is the served
// base model. The API key is read from the variable key_env names.
func (backend) Open(_ context.Context, s policy.Spec) (*policy.Opened, error) {
	var o PolicyOptions
	if po, ok := s.Options.(*PolicyOptions); ok && po != nil {
		o = *po
	}
	if s.Model == "" || len(o.Endpoints) == 0 {
		return nil, errors.New("policy: an openai policy needs a model and endpoints")
	}
	var key string
	if o.KeyEnv != "" {
		if key = os.Getenv(o.KeyEnv); key == "" {
			return nil, fmt.Errorf("policy.key_env: the variable %s is empty or unset; export it before the run", o.KeyEnv)
		}
	}
	c, err := New(&Options{Endpoints: o.Endpoints, Model: s.Model, APIKey: key, KeyEnv: o.KeyEnv,
		Concurrency: o.Concurrency, Timeout: o.Timeout, Retries: o.Retries, Logger: s.Logger})
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	root := o.AdapterRoot
	if root == "" {
		for _, e := range o.Endpoints {
			if !onThisMachine(e) {
				c.Close()
				return nil, fmt.Errorf("policy: %s is not on this machine: set adapter_root to a directory its server shares with this machine", shownURL(e))
			}
		}
		if root, err = policy.LocalAdapterRoot(); err != nil {
			c.Close()
			return nil, fmt.Errorf("policy: %w", err)
		}
	}
	return &policy.Opened{Policy: c, Identity: s.Model, AdapterRoot: root, Stop: c.Close}, nil
}

// onThisMachine reports whether endpoint's host is this machine: a
// loopback address or localhost.
func onThisMachine(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return strings.EqualFold(h, "localhost") || loopback.IsLiteral(h)
}

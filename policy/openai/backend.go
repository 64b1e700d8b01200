package openai

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlpipe/rlpipe/policy"
)

// Kind is the backend's name in policy.Spec and pipeline.yaml: any server
// of the OpenAI API (vLLM, SGLang, llama.cpp).
const Kind = "openai"

func init() { policy.Register(Kind, policy.BackendFunc(open)) }

// open is the backend: a client of the spec's endpoints, whose identity is
// the served base model.
func open(_ context.Context, s policy.Spec) (*policy.Opened, error) {
	if s.Model == "" || len(s.Endpoints) == 0 {
		return nil, errors.New("policy: an openai policy needs a model and endpoints")
	}
	c, err := New(&Options{Endpoints: s.Endpoints, Model: s.Model, APIKey: s.APIKey,
		Concurrency: s.Concurrency, Timeout: s.Timeout, Retries: s.Retries, Logger: s.Logger})
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return &policy.Opened{Policy: c, Identity: s.Model, Stop: c.Close}, nil
}

package policytest

import (
	"context"
	"errors"

	"github.com/rlpipe/rlpipe/policy"
)

// BaseOnly is a policy backend without the optional capabilities: its
// policies implement policy.Policy alone (no policy.AdapterLoader), and
// their Generate fails. Put it in a test's registry (kind "samplesonly")
// to check what a plan refuses of such a backend.
type BaseOnly struct{}

// Name is the kind a test's pipeline file names it by.
func (BaseOnly) Name() string { return "samplesonly" }

// Options takes no keys.
func (BaseOnly) Options() any { return nil }

// Open opens a policy whose identity is the spec's kind.
func (BaseOnly) Open(_ context.Context, s policy.Spec) (*policy.Opened, error) {
	return &policy.Opened{Policy: baseOnly{}, Identity: s.Kind}, nil
}

type baseOnly struct{}

func (baseOnly) Generate(context.Context, []policy.Request, policy.Sampling) ([][]policy.Sample, error) {
	return nil, errors.New("policytest.BaseOnly samples nothing: the test should have stopped before sampling")
}

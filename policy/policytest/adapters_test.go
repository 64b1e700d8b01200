package policytest

import (
	"context"
	"testing"
)

// baseOnly is BaseOnly's policy (baseonly.go).
type loads struct{ baseOnly }

func (loads) LoadAdapter(context.Context, string, string) error { return nil }
func (loads) UnloadAdapter(context.Context, string) error       { return nil }

// TestAdapterCapability: the Capability scenario passes a backend that
// loads adapters, or that says it does not and does not, and fails the
// two that disagree with what they say.
func TestAdapterCapability(t *testing.T) {
	cases := []struct {
		name string
		b    Backend
		want string
	}{
		{"loads adapters", Backend{Policy: loads{}}, ""},
		{"samples base models only, and says so", Backend{Policy: baseOnly{}, NoAdapters: true}, ""},
		{"no AdapterLoader", Backend{Policy: baseOnly{}},
			"policytest.baseOnly does not implement policy.AdapterLoader: a pipeline samples the adapter it trains from iteration 2, and its plan refuses a policy that cannot load it; implement it, or set Backend.NoAdapters for a backend that samples base models only"},
		{"NoAdapters on a loader", Backend{Policy: loads{}, NoAdapters: true},
			"policytest.loads implements policy.AdapterLoader, but the backend sets NoAdapters: drop NoAdapters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := adapterCapability(tc.b); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

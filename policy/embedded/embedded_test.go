package embedded_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/embedded"
	"github.com/rlpipe/rlpipe/policy/openai"
)

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		spec policy.Spec
		want string
	}{
		{policy.Spec{Kind: "torch"}, `unknown policy kind "torch" (use embedded or openai)`},
		{policy.Spec{Kind: embedded.Kind, Options: &embedded.PolicyOptions{Serve: "grpc"}}, `unknown way of serving "grpc"`},
		{policy.Spec{Kind: embedded.Kind, Model: filepath.Join(t.TempDir(), "missing.safetensors")}, "missing.safetensors"},
		{policy.Spec{Kind: openai.Kind}, "needs a model and endpoints"},
	}
	backends := policy.Backends{embedded.Backend, openai.Backend}
	for _, tc := range cases {
		if _, err := backends.Open(ctx, tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// Closing an embedded policy served over HTTP twice (a deferred Close after
// an explicit one) returns instead of waiting forever.
func TestOpenedCloseTwice(t *testing.T) {
	opened, err := embedded.Backend.Open(context.Background(), policy.Spec{Kind: embedded.Kind, Options: &embedded.PolicyOptions{Serve: embedded.ServeHTTP}})
	if err != nil {
		t.Fatal(err)
	}
	if err := opened.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := opened.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

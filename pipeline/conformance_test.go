package pipeline_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/executortest"
)

// TestExecutorConformance runs the executor suite against the local
// executor, as its kind opens it (pipeline.Local: RunOptions.Executor
// nil). An executor kind's test is this one with its own kind.
func TestExecutorConformance(t *testing.T) {
	executortest.Run(t, func(t *testing.T, s executortest.Setup) pipeline.Executor {
		x, err := pipeline.Local.Open(context.Background(), pipeline.ExecutorEnv{Store: s.Store, Repository: "conformance", Pipeline: s.Name})
		if err != nil {
			t.Fatal(err)
		}
		return x
	})
}

// TestExecutorKinds: the registry's list finds a kind by name, and an
// unknown name is ErrUnknownExecutor listing the names it has.
func TestExecutorKinds(t *testing.T) {
	kinds := pipeline.ExecutorKinds{pipeline.Local}
	if k, err := kinds.Lookup("local"); err != nil || k != pipeline.Local {
		t.Errorf("Lookup(local) = %v, %v", k, err)
	}
	_, err := kinds.Lookup("k8s")
	if want := `unknown executor "k8s": use local`; !errors.Is(err, pipeline.ErrUnknownExecutor) || err == nil || err.Error() != want {
		t.Errorf("Lookup(k8s) = %v, want %s", err, want)
	}
	env := pipeline.ExecutorEnv{Getenv: func(k string) string { return map[string]string{"ADDR": "10.0.0.1:7233"}[k] }}
	if got := env.Env("ADDR", "127.0.0.1:7233") + " " + env.Env("NS", "default"); got != "10.0.0.1:7233 default" {
		t.Errorf("Env = %q", got)
	}
}

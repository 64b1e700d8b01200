package driver_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/driver"
)

// TestRunRefusesPolicyWithoutAdapters: a run whose generate stage would
// sample the policy from iteration 2's adapter, on a policy that cannot
// load one, fails before any task runs: no event, no run branch.
func TestRunRefusesPolicyWithoutAdapters(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	src := strings.Replace(pipelineYAML, "generate: {kind: standin, samples_per_prompt: 2}",
		"generate: {kind: rollout, sampling: {n: 2, max_tokens: 4}}", 1) + "policy: {kind: samplesonly}\n"
	cfg := parse(t, src)
	var events []pipeline.Event
	_, err := driver.Run(ctx, st, cfg, driver.Options{OnEvent: func(e pipeline.Event) { events = append(events, e) }})
	want := "pipeline.yaml:12:10: policy.kind: policy kind samplesonly cannot load adapters (policy.AdapterLoader), which the loop needs from iteration 2 to sample stages.generate from the adapter trained before (use kind " +
		strings.Join(kinds.Registry().Policies.Kinds(), " or ") + ", or implement policy.AdapterLoader in the backend)"
	if err == nil || err.Error() != want {
		t.Fatalf("run:\n got %v\nwant %s", err, want)
	}
	if !errors.Is(err, config.ErrCapability) {
		t.Errorf("%v is not config.ErrCapability", err)
	}
	if len(events) != 0 {
		t.Errorf("the engine sent %d events, the first %+v; want none", len(events), events[0])
	}
	if _, err := st.GetBranch(ctx, "runs-exp1"); !errors.Is(err, artifacts.ErrBranchNotFound) {
		t.Errorf("run branch: %v, want %v", err, artifacts.ErrBranchNotFound)
	}

	// One iteration never samples an adapter: the same policy passes the
	// plan, and the loop starts (and fails sampling, in this test).
	cfg = parse(t, strings.Replace(src, "iterations: 2", "iterations: 1", 1))
	events = nil
	_, err = driver.Run(ctx, st, cfg, driver.Options{OnEvent: func(e pipeline.Event) { events = append(events, e) }})
	if err == nil || errors.Is(err, config.ErrCapability) || len(events) == 0 {
		t.Fatalf("one iteration: error %v after %d events, want a sampling failure after the loop started", err, len(events))
	}
}

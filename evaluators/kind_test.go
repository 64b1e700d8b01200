package evaluators_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/evaluators"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// plainModel is an in-process model with no capability beyond its name:
// not a policy.ExactScorer.
type plainModel struct{}

func (plainModel) Version() string { return "plain@0" }

// Build adds the exact pass@1 exactly when the opened policy's model is a
// policy.ExactScorer and the eval set is sampled by evaluation itself: the
// score task's version (which records whether exact pass@1 is measured)
// is NewTasks' with Exact set, or without it.
func TestBuildFindsExactScorer(t *testing.T) {
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	prog := arithReward(t)
	s := policy.Sampling{N: 2, Temperature: 1, MaxTokens: 5}
	base := evaluators.TaskOptions{Metrics: kinds.Registry().Metrics, Reward: prog, Sampling: s, Set: "heldout", Ks: []int{1, 2}}
	want := func(exact bool) string {
		t.Helper()
		o := base
		if exact {
			o.Exact = m.ExactPass
		}
		tasks, err := evaluators.NewTasks(o)
		if err != nil {
			t.Fatal(err)
		}
		return tasks.Score.Version
	}
	withExact, withoutExact := want(true), want(false)
	if withExact == withoutExact {
		t.Fatalf("the score task's version %s does not record exact pass@1", withExact)
	}
	cases := []struct {
		name           string
		model          policy.Local
		stageGenerates bool
		exact          bool
	}{
		{"the embedded model", m, false, true},
		{"a server: no model in this process", nil, false, false},
		{"an in-process model without the capability", plainModel{}, false, false},
		{"the embedded model, the eval set sampled by episodes", m, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opened := &policy.Opened{Policy: tiny.NewPolicy(m), Identity: m.Version(), Model: c.model}
			defer opened.Close()
			e := kind.Eval{Policy: opened, Sampling: s, Set: "heldout", Ks: []int{1, 2}, Metrics: kinds.Registry().Metrics, Scorer: prog}
			if c.stageGenerates {
				e.Generate = func(string) (*pipeline.Task, error) { return nil, nil }
			}
			_, score, err := evaluators.Build(e)
			if err != nil {
				t.Fatal(err)
			}
			w := withoutExact
			if c.exact {
				w = withExact
			}
			if score.Version != w {
				t.Errorf("score task version %s, want %s (exact pass@1: %v)", score.Version, w, c.exact)
			}
		})
	}
}

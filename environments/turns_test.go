package environments_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/policy"
)

// failingStep is a countdown whose step number fail returns an error.
type failingStep struct {
	countdown
	fail, step int
}

func (f *failingStep) Step(ctx context.Context, action string) (environments.Step, error) {
	if f.step++; f.step == f.fail {
		return environments.Step{}, errors.New("the world fell over")
	}
	return f.countdown.Step(ctx, action)
}

// Each turn holds what the policy returned for it: a reply its token ids
// and logprobs, which concatenated are the row's and which are exactly
// the trainable runs of the sequence; a turn the policy was given holds
// none. Every turn is ok but the one that ended an episode that did not
// end ok, which holds the episode's status. The turns survive a write
// and a read of the table.
func TestTurnTokensAndStatuses(t *testing.T) {
	const ok, truncated = tables.StatusOK, tables.StatusTruncated
	for _, c := range []struct {
		name     string
		env      environments.Env
		eos      int32
		maxTurns int
		budget   int
		status   string
		statuses []string
	}{
		// user go, reply, user 1 left, reply, user 0 left (done)
		{name: "ok", env: &countdown{steps: 2}, eos: 3, maxTurns: 4, status: ok, statuses: []string{ok, ok, ok, ok, ok}},
		{name: "ok, pad is eos", env: &countdown{steps: 2}, eos: 0, maxTurns: 4, status: ok, statuses: []string{ok, ok, ok, ok, ok}},
		// The observation after the last allowed turn ends it.
		{name: "turn budget", env: &countdown{steps: 9}, eos: 3, maxTurns: 2, status: truncated,
			statuses: []string{ok, ok, ok, ok, truncated}},
		// Turn 0 takes 5 prompt and 3 reply tokens; turn 1's prompt
		// holds 17 and its reply 2: 19 passes 18, at that reply.
		{name: "token budget", env: &countdown{steps: 9}, eos: 3, maxTurns: 4, budget: 18, status: truncated,
			statuses: []string{ok, ok, ok, truncated}},
		// The environment fails on the second reply.
		{name: "env error", env: &failingStep{countdown: countdown{steps: 9}, fail: 2}, eos: 3, maxTurns: 4, status: tables.StatusEnvError,
			statuses: []string{ok, ok, ok, tables.StatusEnvError}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &templated{eos: c.eos, replies: []string{"ab", "c"}}
			r := newRunner(t, p, &environments.RunnerOptions{MaxTurns: c.maxTurns, MaxEpisodeTokens: c.budget,
				Sampling: policy.Sampling{MaxTokens: 4, Temperature: 1, Logprobs: true, PromptLogprobs: true}})
			res, err := r.Run(context.Background(), c.env, environments.Episode{ID: "e1"})
			if err != nil {
				t.Fatal(err)
			}
			tr := res.Trajectory
			if tr.Status != c.status || res.Unaligned != "" {
				t.Fatalf("status %s (%s), unaligned %q; want %s", tr.Status, deref(tr.Error), res.Unaligned, c.status)
			}
			var statuses []string
			var ids []int32
			var lps []float32
			var replies [][]int32
			for i, tu := range tr.Turns {
				statuses = append(statuses, tu.Status)
				if tu.Role != "assistant" {
					if tu.TokenIDs != nil || tu.Logprobs != nil {
						t.Errorf("turn %d (%s) holds token ids %v, logprobs %v; want none", i, tu.Role, tu.TokenIDs, tu.Logprobs)
					}
					continue
				}
				if len(tu.TokenIDs) == 0 || len(tu.Logprobs) != len(tu.TokenIDs) {
					t.Errorf("reply %d: %d token ids, %d logprobs", i, len(tu.TokenIDs), len(tu.Logprobs))
				}
				ids, lps = append(ids, tu.TokenIDs...), append(lps, tu.Logprobs...)
				replies = append(replies, tu.TokenIDs)
			}
			if !reflect.DeepEqual(statuses, c.statuses) {
				t.Errorf("turn statuses %q, want %q", statuses, c.statuses)
			}
			if !reflect.DeepEqual(ids, tr.TokenIDs) || !reflect.DeepEqual(lps, tr.Logprobs) {
				t.Errorf("the turns' token ids %v and logprobs %v, concatenated, are not the row's %v and %v", ids, lps, tr.TokenIDs, tr.Logprobs)
			}
			// The k-th run of trainable tokens is the k-th reply's ids.
			var runs [][]int32
			for i, m := range tr.Trainable {
				switch {
				case m == 0:
				case i > 0 && tr.Trainable[i-1] == 1:
					runs[len(runs)-1] = append(runs[len(runs)-1], tr.Sequence[i])
				default:
					runs = append(runs, []int32{tr.Sequence[i]})
				}
			}
			if !reflect.DeepEqual(runs, replies) {
				t.Errorf("trainable runs %v, replies %v", runs, replies)
			}
			var buf bytes.Buffer
			if err := tables.Write(&buf, tables.Trajectories, []tables.Trajectory{tr}, nil); err != nil {
				t.Fatal(err)
			}
			back, err := tables.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "t.parquet", tables.Trajectories)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back[0].Turns, tr.Turns) {
				t.Errorf("turns read back as %+v, want %+v", back[0].Turns, tr.Turns)
			}
		})
	}
}

package policy

import (
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// PromptRequest is the request of a prompt: its chat messages when it has
// them, else its text; seeded from the task seed and the prompt id so a
// prompt samples the same way whatever batch it lands in.
func PromptRequest(pr tables.Prompt, taskSeed uint64) Request {
	r := Request{ID: pr.PromptID, Seed: RequestSeed(int64(taskSeed), pr.PromptID)}
	if len(pr.Messages) > 0 {
		for _, m := range pr.Messages {
			r.Messages = append(r.Messages, Message{Role: m.Role, Content: m.Content})
		}
	} else {
		r.Prompt = pr.Prompt
	}
	return r
}

// RowParams place a batch of samples in the loop.
type RowParams struct {
	// Iteration is the iteration (or checkpoint) that drew the samples;
	// it prefixes their group ids, "000003-<prompt id>".
	Iteration int
	// Staleness is how many policy updates lie between the policy that
	// drew the samples and the one trained on them.
	Staleness int
}

// TrajectoryRow is the trajectories row of sample j of a request.
// version names the policy (a sample's own PolicyVersion wins); sampler
// is the sampling parameters' JSON (Sampling.JSON).
func TrajectoryRow(s Sample, req Request, j int, p RowParams, version, sampler string) tables.Trajectory {
	status := s.Status
	if status == "" {
		status = tables.StatusOK
	}
	if s.PolicyVersion != "" {
		version = s.PolicyVersion
	}
	t := tables.Trajectory{
		PromptID: req.ID, SampleIndex: int32(j), GroupID: fmt.Sprintf("%06d-%s", p.Iteration, req.ID),
		Completion: s.Text, TokenIDs: s.TokenIDs, Logprobs: s.Logprobs, FinishReason: s.FinishReason,
		NumTokens: int32(len(s.TokenIDs)), PolicyVersion: version, Sampler: sampler, Seed: req.Seed,
		Staleness: int32(p.Staleness), Status: status,
	}
	if t.TokenIDs == nil {
		t.NumTokens = int32(len(s.Text))
	}
	if status != tables.StatusOK {
		e := s.Error
		if e == "" {
			e = "the policy returned no text"
		}
		t.Error = &e
	}
	return t
}

// NoneServed fails a batch in which no sample came back and at least one
// failed for the servers' sake (infra_error, timeout): the policy's
// servers are down, and an iteration of nothing but failures would be
// committed and cached. A generate task that returns the error is
// retried, and a rerun resumes there once the servers answer. Some samples
// failing is the servers' passing trouble: those are kept with their
// status and never trained on.
func NoneServed(rows []tables.Trajectory) error {
	var first *tables.Trajectory
	for i, r := range rows {
		switch r.Status {
		case tables.StatusOK:
			return nil
		case tables.StatusInfraError, tables.StatusTimeout:
			if first == nil {
				first = &rows[i]
			}
		}
	}
	if first == nil {
		return nil
	}
	msg := ""
	if first.Error != nil {
		msg = *first.Error
	}
	return fmt.Errorf("every one of the %d samples failed, none served (the first, of prompt %q: %s %s): check the policy's servers; the task is retried, and a rerun resumes here", len(rows), first.PromptID, first.Status, msg)
}

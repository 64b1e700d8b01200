package rewards

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
)

// Errors. Each wraps artifacts.ErrInvalid.
var (
	// ErrSpec: a reward spec does not parse or does not compile. The error
	// joins one *SpecError per problem, each naming the file, line and
	// column.
	ErrSpec = fmt.Errorf("invalid reward spec: %w", artifacts.ErrInvalid)
	// ErrNoRunner: the spec declares a verifier or judge that Compile was
	// given no function for (WithVerifier, WithJudge).
	ErrNoRunner = fmt.Errorf("%w: verifier or judge without an implementation", ErrSpec)
	// ErrNoPrompts: the spec reads prompt columns (prompt, messages,
	// answer, metadata) and ScoreOptions.Prompts is nil.
	ErrNoPrompts = fmt.Errorf("reward spec reads the prompts table, none given: %w", artifacts.ErrInvalid)
)

// Reward row statuses.
const (
	// StatusOK: every component was computed.
	StatusOK = "ok"
	// StatusError: a component, the total, a verifier or a judge failed on
	// this row, or the row's prompt is missing; Error says which and why.
	StatusError = "error"
	// StatusNonfinite: a component, the total or a judge's score came out
	// NaN or infinite on this row; Error says which and the value. The
	// row is not scored (tables.RewardNonfinite).
	StatusNonfinite = tables.RewardNonfinite
	// SkippedPrefix starts the status of a trajectory that was not scored
	// because its own status is not one the spec scores: "skipped: timeout".
	SkippedPrefix = "skipped: "
)

// Row is what a reward is computed from: a trajectory and its prompt.
// Strings may share memory with the batch they were read from: a
// VerifierFunc or JudgeFunc that keeps one past its return should copy it
// (strings.Clone).
type Row struct {
	Trajectory tables.Trajectory
	// Prompt is the trajectory's prompt (by prompt_id); zero when no
	// prompts table was given or the prompt is not in it (HasPrompt).
	Prompt    tables.Prompt
	HasPrompt bool
}

// VerifierResult is what a verifier reports for one row. In CEL it is
// rewards.VerifierResult, read as verifiers.<name>.passed and so on.
type VerifierResult struct {
	Passed   bool   `cel:"passed" json:"passed"`
	ExitCode int    `cel:"exit_code" json:"exit_code"`
	Stdout   string `cel:"stdout" json:"stdout"`
	TimedOut bool   `cel:"timed_out" json:"timed_out"`
	// Status is the verifier's own account ("ok", "timeout", …).
	Status string `cel:"status" json:"status"`
	// Reason says why, when the verifier gives one: a checker's reason
	// for failing, or the attempt at the checker's files that was seen.
	Reason string `cel:"reason" json:"reason,omitempty"`
}

// JudgeResult is what a judge reports for one row. In CEL it is
// rewards.JudgeResult, read as judges.<name>.score and so on.
type JudgeResult struct {
	Score  float64 `cel:"score" json:"score"`
	Status string  `cel:"status" json:"status"`
	Reason string  `cel:"reason" json:"reason"`
}

// Memoizer is pipeline.Memoizer, the one memo contract (an alias, not a
// second type), named here because the verifier and judge signatures a
// spec's author writes take it: it records a call's result (or its
// permanent error) under a key and replays it instead of calling again.
// A task's *pipeline.TaskContext is one: its records live in the store,
// so a retried task, a resumed run or a rescoring replays them. It is
// per-call state, given when scoring (ScoreOptions.Memo, Score), never
// when compiling.
type Memoizer = pipeline.Memoizer

// VerifierFunc checks one row, e.g. by running the completion's code in
// a sandbox. memo is the scoring call's Memoizer, nil when it has none: a
// verifier that is slow or costs money records its result through it,
// keyed by everything that decides the result. An error marks the row's
// status "error" (it is not scored); a failed check is a result with
// Passed false, not an error.
type VerifierFunc func(ctx context.Context, r Row, memo Memoizer) (VerifierResult, error)

// JudgeFunc grades one row, e.g. by asking a model. memo is as for
// VerifierFunc. An error marks the row's status "error".
type JudgeFunc func(ctx context.Context, r Row, memo Memoizer) (JudgeResult, error)

// errCanceled tells a row that was cut short by its context from one
// that failed.
func isCanceled(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

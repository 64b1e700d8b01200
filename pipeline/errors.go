package pipeline

import (
	"errors"
	"fmt"
)

// Errors of the engine, tested with errors.Is.
var (
	// ErrPermanent marks an error that retrying cannot fix; wrap one with
	// Permanent to stop retries at once.
	ErrPermanent = errors.New("not retryable")
	// ErrTimeout: an attempt ran past its timeout (and was killed).
	ErrTimeout = errors.New("attempt timed out")
	// ErrDeadline: the deadline over all attempts passed; no more retries.
	ErrDeadline = errors.New("task deadline passed")
	// ErrUnschedulable: a task asks for more resources than the machine has.
	ErrUnschedulable = errors.New("task can never be scheduled")
	// ErrBusy: Worker.TryAttempt found the job's resources or its
	// environment's concurrency taken on its worker.
	ErrBusy = errors.New("the worker has no room for the task now")
	// ErrOutput: a task's declared output is missing or has the wrong schema.
	ErrOutput = errors.New("bad task output")
	// ErrRunLocked: another process is running this run.
	ErrRunLocked = errors.New("run is locked by another process")
	// ErrConfig: the pipeline configuration is invalid.
	ErrConfig = errors.New("invalid pipeline config")
	// ErrUpstream: a task did not run because a task it depends on failed.
	ErrUpstream = errors.New("upstream task failed")
	// ErrBatchTooLarge: batch_size is larger than the dataset, and a batch
	// holds each prompt at most once (BatchError says by how much).
	ErrBatchTooLarge = fmt.Errorf("%w: batch_size is larger than the dataset", ErrConfig)
)

type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() []error {
	return []error{p.err, ErrPermanent}
}

// Permanent marks err as not retryable: the task fails at once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// TaskError is the final error of a task after its attempts.
type TaskError struct {
	Task     string // task name
	Group    string // iteration label, e.g. "iteration 000003"
	Attempts int
	Err      error
}

func (e *TaskError) Error() string {
	if e.Attempts == 0 {
		return fmt.Sprintf("task %s (%s) failed before running: %v", e.Task, e.Group, e.Err)
	}
	return fmt.Sprintf("task %s (%s) failed after %d attempt(s): %v", e.Task, e.Group, e.Attempts, e.Err)
}

func (e *TaskError) Unwrap() error { return e.Err }

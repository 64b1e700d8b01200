package pipeline

import "fmt"

// TakeBatch is the sample stage's rule (docs/PIPELINE.md, kind: dataset):
// the count rows of a dataset from cursor on, in order, wrapping around
// at its end — the next epoch starts again at row 0. A batch holds each
// row at most once, so count may not exceed len(rows): then the batch
// would repeat a prompt, and TakeBatch returns a *BatchError instead.
// With count ≤ len(rows) the count positions (cursor+i) mod len(rows)
// are distinct, so a batch that spans the end of one epoch and the start
// of the next holds no row twice either.
func TakeBatch[T any](rows []T, cursor, count int) ([]T, error) {
	if count > len(rows) {
		return nil, &BatchError{BatchSize: count, Rows: len(rows)}
	}
	out := make([]T, count)
	for i := range out {
		out[i] = rows[(cursor+i)%len(rows)]
	}
	return out, nil
}

// BatchError is a batch_size larger than the dataset it samples. It is
// an ErrBatchTooLarge, and so an ErrConfig.
type BatchError struct {
	BatchSize, Rows int
	// Dataset names the dataset, REF:PATH ("" inside a task, which sees
	// only the file).
	Dataset string
}

func (e *BatchError) Error() string {
	what := "the dataset"
	if e.Dataset != "" {
		what = "dataset " + e.Dataset
	}
	if e.Rows == 0 {
		return what + " has no prompts: import some with `rlpipe dataset import`"
	}
	return fmt.Sprintf("batch_size %d is more than the %d prompts of %s, and a batch holds each prompt at most once: lower batch_size to at most %d, or add prompts to the dataset",
		e.BatchSize, e.Rows, what, e.Rows)
}

func (e *BatchError) Unwrap() error { return ErrBatchTooLarge }

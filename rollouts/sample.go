package rollouts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
)

// SampleParams are the loop's parameters of a sample call.
type SampleParams struct {
	Cursor    int `json:"cursor"`
	Count     int `json:"count"`
	Iteration int `json:"iteration"`
}

// SampleTask returns the sample stage: it takes Count prompts of the
// "dataset" input starting at Cursor, in order, wrapping around at the
// end (an epoch), and writes them as the iteration's prompts table
// (pipeline.TakeBatch). A batch holds each prompt at most once: a Count
// larger than the dataset fails the task at once (driver.Run refuses the
// config before it gets here). The loop advances the cursor only when an
// iteration commits, so a resumed run takes every prompt exactly once.
//
// The task keeps the last dataset it decoded, by the SHA-256 of its
// bytes, and reuses its rows while the next call's file has the same
// bytes: every iteration of a run samples the same dataset, and decoding
// its thousands of rows was most of the stage's time (bench/README.md).
func SampleTask() *pipeline.Task {
	var last datasetMemo
	return &pipeline.Task{
		Name: "sample", Version: "dataset-1", Env: "sample", Deterministic: true, Bookkeeping: true,
		Outputs: []pipeline.Output{pipeline.TableOutput(pipeline.OutPrompts, runs.PromptsFile, tables.Prompts)},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			var p SampleParams
			if err := tc.Params(&p); err != nil {
				return err
			}
			all, err := last.read(tc.InputPath("dataset"))
			if err != nil {
				return err
			}
			if len(all) == 0 {
				return pipeline.Permanent(errors.New("the dataset has no prompts; import some with `rlpipe dataset`"))
			}
			rows, err := pipeline.TakeBatch(all, p.Cursor, p.Count)
			if err != nil {
				return pipeline.Permanent(err)
			}
			return tables.WriteFile(tc.OutputPath(pipeline.OutPrompts), tables.Prompts, rows, nil)
		},
	}
}

// datasetMemo is the last dataset a sample task decoded: the SHA-256 of
// its file and its rows, which callers share and never change.
type datasetMemo struct {
	mu   sync.Mutex
	sum  [sha256.Size]byte
	rows []tables.Prompt
}

// read returns the rows of the dataset file at path, decoding it only
// when its bytes differ from the last file read. Its errors are
// Permanent, as the task's were before it kept the rows.
func (m *datasetMemo) read(path string) ([]tables.Prompt, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, pipeline.Permanent(fmt.Errorf("dataset: %w", err))
	}
	sum := sha256.Sum256(raw)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rows != nil && sum == m.sum {
		return m.rows, nil
	}
	rows, err := tables.Read(bytes.NewReader(raw), int64(len(raw)), filepath.Base(path), tables.Prompts)
	if err != nil {
		return nil, pipeline.Permanent(fmt.Errorf("dataset: %w", err))
	}
	m.sum, m.rows = sum, rows
	return rows, nil
}

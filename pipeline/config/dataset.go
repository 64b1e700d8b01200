package config

import (
	"bytes"
	"context"
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
)

// CheckDataset checks the file against the store it is about to run on,
// before anything is written: the dataset must be a prompts table whose
// every page reads back, of at least batch_size rows, since a batch holds each prompt at most once
// (pipeline.TakeBatch). A batch_size too large is an *Error at the
// batch_size key that is a *pipeline.BatchError (errors.As); a dataset
// that is missing, not a prompts table or empty is an *Error at the
// dataset key. Every one is a pipeline.ErrConfig.
func (c *Config) CheckDataset(ctx context.Context, st artifacts.Store) error {
	ref, path, err := artifacts.SplitArtifact(c.Dataset)
	if err != nil {
		return c.errorAt("dataset", "", nil, "dataset: %v", err)
	}
	b, err := artifacts.ReadObject(ctx, st, ref, path)
	switch {
	case err != nil:
		return fmt.Errorf("read dataset %s: %w", c.Dataset, err)
	case b == nil:
		return c.errorAt("dataset", "import one with `rlpipe dataset import`, or fix the REF:PATH", nil,
			"dataset: %s does not exist", c.Dataset)
	}
	rd, err := tables.NewReader(bytes.NewReader(b), int64(len(b)), c.Dataset, tables.Prompts, nil)
	if err != nil {
		return c.errorAt("dataset", "", nil, "dataset: %v", err)
	}
	defer rd.Close()
	// Every page is decoded once here, so that a corrupt page fails the
	// plan naming REF:PATH, not the sample stage naming its local copy.
	for _, err := range rd.Records(ctx) {
		if err != nil {
			return c.errorAt("dataset", "the stored file is not a readable table: import the dataset again from its source, or point dataset at another prompts table", nil, "dataset: %v", err)
		}
	}
	be := &pipeline.BatchError{BatchSize: c.BatchSize, Rows: int(rd.NumRows()), Dataset: c.Dataset}
	switch {
	case be.Rows == 0:
		return c.errorAt("dataset", "", be, "%v", be)
	case c.BatchSize > be.Rows:
		return c.errorAt("batch_size", "", be, "%v", be)
	}
	return nil
}

// ErrorAt is an *Error at the key of path (e.g. "iterations"), for a
// problem found outside the file, in the store: hint says what to do.
func (c *Config) ErrorAt(path, hint, format string, a ...any) error {
	return c.errorAt(path, hint, nil, format, a...)
}

// errorAt is an *Error at path's key; cause, when not nil, is a more
// specific pipeline.ErrConfig it unwraps to.
func (c *Config) errorAt(path, hint string, cause error, format string, a ...any) error {
	p := c.at(path)
	e := &Error{File: c.file, Line: p.line, Column: p.col, Path: path, Msg: fmt.Sprintf(format, a...), Hint: hint}
	if cause != nil {
		e.kind = cause
	}
	markOverride(e, c.ovs)
	return e
}

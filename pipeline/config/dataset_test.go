package config_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/standin"
)

// TestCheckDataset checks the file against the store before a run: a
// batch_size larger than the dataset is told at the batch_size key with
// both numbers, the dataset and what to do; a dataset the sampler cannot
// read — another table, a truncated file, a damaged page — is told at the
// dataset key, naming its REF:PATH.
func TestCheckDataset(t *testing.T) {
	ctx := context.Background()
	st := artifactstest.NewLocal(t)
	if err := standin.PutDataset(ctx, st, "main", "data/ten.parquet", 10); err != nil {
		t.Fatal(err)
	}
	if err := standin.PutDataset(ctx, st, "main", "data/empty.parquet", 0); err != nil {
		t.Fatal(err)
	}
	var rewards bytes.Buffer
	if err := tables.Write(&rewards, tables.Rewards, []tables.Reward{{PromptID: "p1", Status: tables.StatusOK}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutObject(ctx, "main", "data/rewards.parquet", &rewards, nil); err != nil {
		t.Fatal(err)
	}
	// A prompts table whose pages are damaged (its footer is intact, so
	// opening it works), and one cut short.
	var prompts bytes.Buffer
	rows := make([]tables.Prompt, 500)
	for i := range rows {
		rows[i] = tables.Prompt{PromptID: fmt.Sprintf("p%03d", i), Prompt: strings.Repeat("what is 2+2? ", 20), Answer: "4", Metadata: "{}"}
	}
	if err := tables.Write(&prompts, tables.Prompts, rows, nil); err != nil {
		t.Fatal(err)
	}
	good := prompts.Bytes()
	corrupt := bytes.Clone(good)
	for i := 16; i < len(corrupt)/5; i += 7 {
		corrupt[i] ^= 0x5a
	}
	for path, b := range map[string][]byte{"data/corrupt.parquet": corrupt, "data/truncated.parquet": good[:len(good)/2]} {
		if _, err := st.PutObject(ctx, "main", path, bytes.NewReader(b), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Commit(ctx, "main", "a rewards table", nil); err != nil {
		t.Fatal(err)
	}
	with := func(batch, dataset string) string {
		s := strings.Replace(base, "batch_size: 4", "batch_size: "+batch, 1)
		return strings.Replace(s, "dataset: main:data/prompts.parquet", "dataset: "+dataset, 1)
	}
	tests := []struct {
		name      string
		src       string
		want      string // "" for no error; else how the error starts
		wantEnd   string // how it ends, when given
		batchSize bool   // a *pipeline.BatchError
	}{
		{name: "batch smaller than the dataset", src: with("4", "main:data/ten.parquet")},
		{name: "batch as large as the dataset", src: with("10", "main:data/ten.parquet")},
		{name: "batch larger than the dataset", src: with("16", "main:data/ten.parquet"), batchSize: true,
			want: "pipeline.yaml:4:1: batch_size 16 is more than the 10 prompts of dataset main:data/ten.parquet, and a batch holds each prompt at most once: lower batch_size to at most 10, or add prompts to the dataset"},
		{name: "empty dataset", src: with("4", "main:data/empty.parquet"), batchSize: true,
			want: "pipeline.yaml:5:1: dataset main:data/empty.parquet has no prompts: import some with `rlpipe dataset import`"},
		{name: "missing dataset", src: with("4", "main:data/nine.parquet"),
			want: "pipeline.yaml:5:1: dataset: main:data/nine.parquet does not exist (import one with `rlpipe dataset import`, or fix the REF:PATH)"},
		{name: "not a prompts table", src: with("4", "main:data/rewards.parquet"),
			want: `pipeline.yaml:5:1: dataset: read prompts file "main:data/rewards.parquet": `},
		// It passed the plan and failed the sample stage as
		// `dataset: read "dataset": parquet: could not decompress page`.
		{name: "a corrupt page", src: with("4", "main:data/corrupt.parquet"),
			want:    `pipeline.yaml:5:1: dataset: read "main:data/corrupt.parquet": `,
			wantEnd: " (the stored file is not a readable table: import the dataset again from its source, or point dataset at another prompts table)"},
		{name: "a truncated file", src: with("4", "main:data/truncated.parquet"),
			want: `pipeline.yaml:5:1: dataset: read prompts file "main:data/truncated.parquet": not a readable parquet file: no PAR1 magic at the end: truncated, or still being written`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := mustParse(t, tt.src).CheckDataset(ctx, st)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckDataset: %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) || !strings.HasSuffix(err.Error(), tt.wantEnd) {
				t.Fatalf("CheckDataset = %v\nwant %s", err, tt.want)
			}
			var ce *config.Error
			var be *pipeline.BatchError
			if !errors.As(err, &ce) || !errors.Is(err, pipeline.ErrConfig) || errors.As(err, &be) != tt.batchSize {
				t.Errorf("%v: a *config.Error %v, an ErrConfig %v, a *pipeline.BatchError %v (want %v)",
					err, errors.As(err, &ce), errors.Is(err, pipeline.ErrConfig), errors.As(err, &be), tt.batchSize)
			}
			if tt.batchSize && tt.name == "batch larger than the dataset" && (!errors.Is(err, pipeline.ErrBatchTooLarge) || be.BatchSize != 16 || be.Rows != 10) {
				t.Errorf("%v: %+v, want an ErrBatchTooLarge of 16 over 10", err, be)
			}
		})
	}
}

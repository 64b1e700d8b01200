package pipeline_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/pipeline"
)

// TestTakeBatch checks the sample stage's rule: count rows from the
// cursor, wrapping at the end of the dataset, never one row twice.
func TestTakeBatch(t *testing.T) {
	ten := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	tests := []struct {
		name          string
		cursor, count int
		want          []int
	}{
		{name: "first batch", cursor: 0, count: 4, want: []int{0, 1, 2, 3}},
		{name: "within the second epoch", cursor: 12, count: 4, want: []int{2, 3, 4, 5}},
		{name: "spans the end of an epoch", cursor: 8, count: 4, want: []int{8, 9, 0, 1}},
		{name: "the whole dataset from the middle", cursor: 23, count: 10, want: []int{3, 4, 5, 6, 7, 8, 9, 0, 1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pipeline.TakeBatch(ten, tt.cursor, tt.count)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("TakeBatch(10 rows, %d, %d) = %v, %v; want %v", tt.cursor, tt.count, got, err, tt.want)
			}
		})
	}
}

// TestTakeBatchNeverRepeats tries every cursor of two epochs and every
// batch size up to the dataset's: no batch holds a row twice, and the
// loop's batches (cursor advancing by count) take every row once per
// epoch.
func TestTakeBatchNeverRepeats(t *testing.T) {
	for n := 1; n <= 12; n++ {
		rows := make([]int, n)
		for i := range rows {
			rows[i] = i
		}
		for count := 1; count <= n; count++ {
			seen := map[int]int{}
			for cursor := 0; cursor < 2*n*count; cursor += count {
				batch, err := pipeline.TakeBatch(rows, cursor, count)
				if err != nil {
					t.Fatalf("n=%d count=%d cursor=%d: %v", n, count, cursor, err)
				}
				in := map[int]bool{}
				for _, r := range batch {
					if in[r] {
						t.Fatalf("n=%d count=%d cursor=%d: batch %v holds row %d twice", n, count, cursor, batch, r)
					}
					in[r] = true
					seen[r]++
				}
			}
			for r := range rows {
				if seen[r] != 2*count {
					t.Fatalf("n=%d count=%d: row %d taken %d times in %d epochs, want %d", n, count, r, seen[r], 2*count, 2*count)
				}
			}
		}
	}
}

// TestTakeBatchLargerThanDataset: a batch larger than the dataset would
// repeat a prompt; the error says both numbers and what to do.
func TestTakeBatchLargerThanDataset(t *testing.T) {
	tests := []struct {
		name  string
		rows  int
		count int
		want  string
	}{
		{name: "ten prompts, batch 16", rows: 10, count: 16,
			want: "batch_size 16 is more than the 10 prompts of the dataset, and a batch holds each prompt at most once: lower batch_size to at most 10, or add prompts to the dataset"},
		{name: "one more than the dataset", rows: 3, count: 4,
			want: "batch_size 4 is more than the 3 prompts of the dataset, and a batch holds each prompt at most once: lower batch_size to at most 3, or add prompts to the dataset"},
		{name: "empty dataset", rows: 0, count: 1,
			want: "the dataset has no prompts: import some with `rlpipe dataset import`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pipeline.TakeBatch(make([]string, tt.rows), 5, tt.count)
			var be *pipeline.BatchError
			if got != nil || !errors.As(err, &be) || be.BatchSize != tt.count || be.Rows != tt.rows || err.Error() != tt.want {
				t.Fatalf("TakeBatch = %v, %v; want the error %q", got, err, tt.want)
			}
			if !errors.Is(err, pipeline.ErrBatchTooLarge) || !errors.Is(err, pipeline.ErrConfig) {
				t.Errorf("%v is not an ErrBatchTooLarge and an ErrConfig", err)
			}
		})
	}
}

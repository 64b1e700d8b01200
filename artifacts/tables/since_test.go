package tables

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// A trajectories file of schema version 1, written before episodes had
// token sequences, reads with sequence_ids and trainable null; a version 2
// file without them is refused, naming the column.
func TestColumnsAddedLaterReadAsNull(t *testing.T) {
	cols := Trajectories.cols[:len(Trajectories.cols)-2]
	v1 := newTable(TrajectoriesName, 1, cols)
	rows := []Trajectory{{PromptID: "p0", SampleIndex: 1, Completion: "7", TokenIDs: []int32{4, 2}, Logprobs: []float32{-0.5, -0.25}, Status: StatusOK}}
	var buf bytes.Buffer
	if err := Write(&buf, v1, rows, nil); err != nil {
		t.Fatal(err)
	}
	got, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "old.parquet", Trajectories)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rows) || got[0].Sequence != nil || got[0].Trainable != nil {
		t.Errorf("read %+v, want %+v with null sequence and mask", got, rows)
	}

	v2 := newTable(TrajectoriesName, 2, cols)
	buf.Reset()
	if err := Write(&buf, v2, rows, nil); err != nil {
		t.Fatal(err)
	}
	_, err = Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "new.parquet", Trajectories)
	var se *SchemaError
	if !errors.As(err, &se) || se.Column != "sequence_ids" {
		t.Errorf("a version 2 file without sequence_ids: %v", err)
	}
}

func TestEpisodeMaskMustMatchItsSequence(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf, Trajectories, []Trajectory{{PromptID: "p", Status: StatusOK, Sequence: []int32{1, 2, 3}, Trainable: []int32{0, 1}}}, nil)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("sequence_ids has 3 tokens and trainable 2")) {
		t.Errorf("a mask shorter than its sequence: %v", err)
	}
}

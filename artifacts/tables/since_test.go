package tables

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// A trajectories file of schema version 1, written before episodes had
// token sequences, reads with sequence_ids, trainable and env_outcome
// null; one of version 2 with env_outcome null; a file of a version that
// has the column but lacks it is refused, naming the column.
func TestColumnsAddedLaterReadAsNull(t *testing.T) {
	all := Trajectories.cols
	rows := []Trajectory{{PromptID: "p0", SampleIndex: 1, Completion: "7", TokenIDs: []int32{4, 2}, Logprobs: []float32{-0.5, -0.25}, Status: StatusOK}}
	write := func(version, ncols int) *bytes.Buffer {
		t.Helper()
		var buf bytes.Buffer
		if err := Write(&buf, newTable(TrajectoriesName, version, all[:ncols]), rows, nil); err != nil {
			t.Fatal(err)
		}
		return &buf
	}
	for _, old := range []struct{ version, ncols int }{{1, len(all) - 3}, {2, len(all) - 1}} {
		buf := write(old.version, old.ncols)
		got, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "old.parquet", Trajectories)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, rows) || got[0].Sequence != nil || got[0].Trainable != nil || got[0].EnvOutcome != nil {
			t.Errorf("version %d: read %+v, want %+v with the later columns null", old.version, got, rows)
		}
	}
	for _, bad := range []struct {
		version, ncols int
		missing        string
	}{{2, len(all) - 3, "sequence_ids"}, {3, len(all) - 1, "env_outcome"}} {
		buf := write(bad.version, bad.ncols)
		_, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "new.parquet", Trajectories)
		var se *SchemaError
		if !errors.As(err, &se) || se.Column != bad.missing {
			t.Errorf("a version %d file without %s: %v", bad.version, bad.missing, err)
		}
	}
}

// A trajectories file written before version 4, whose turns have only
// role, content and tool_calls, reads with each turn's token_ids,
// logprobs and status null; a version 4 file whose turns lack them is
// refused, naming the field.
func TestTurnFieldsAddedLaterReadAsNull(t *testing.T) {
	oldTurn := arrow.StructOf(turnType.Fields()[:3]...)
	old := Trajectories.cols
	cols := append([]column[Trajectory](nil), old...)
	for i, c := range cols {
		if c.field.Name == "turns" {
			cols[i] = oldTurnsCol(oldTurn)
		}
	}
	calls := "[]"
	rows := []Trajectory{
		{PromptID: "p0", Turns: []Turn{{Role: "user", Content: "q"}, {Role: "assistant", Content: "7", ToolCalls: &calls}},
			TokenIDs: []int32{4, 2}, Logprobs: []float32{-0.5, -0.25}, Status: StatusOK},
		{PromptID: "p1", Status: StatusOK},
	}
	write := func(version int) *bytes.Buffer {
		t.Helper()
		var buf bytes.Buffer
		if err := Write(&buf, newTable(TrajectoriesName, version, cols), rows, nil); err != nil {
			t.Fatal(err)
		}
		return &buf
	}
	buf := write(3)
	got, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "old.parquet", Trajectories)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rows) {
		t.Errorf("version 3: read %+v, want %+v with the turns' later fields null", got, rows)
	}
	for _, tu := range got[0].Turns {
		if tu.TokenIDs != nil || tu.Logprobs != nil || tu.Status != "" {
			t.Errorf("version 3 turn %+v: want token_ids, logprobs and status null", tu)
		}
	}
	for _, v := range []int{4} {
		buf := write(v)
		_, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "new.parquet", Trajectories)
		var se *SchemaError
		if !errors.As(err, &se) || se.Column != "turns.element.token_ids" {
			t.Errorf("a version %d file whose turns lack token_ids: %v", v, err)
		}
	}
}

// oldTurnsCol writes turns as a list of typ, a prefix of turnType's
// fields (role, content, tool_calls): the turns of an older version.
func oldTurnsCol(typ *arrow.StructType) column[Trajectory] {
	c := turnsCol("turns", "", func(r *Trajectory) *[]Turn { return &r.Turns })
	c.field.Type = listOf(typ)
	c.enc = func(b array.Builder) func(*Trajectory) {
		lb := b.(*array.ListBuilder)
		sb := lb.ValueBuilder().(*array.StructBuilder)
		return func(r *Trajectory) {
			lb.Append(true)
			for _, tu := range r.Turns {
				sb.Append(true)
				sb.FieldBuilder(0).(*array.StringBuilder).Append(tu.Role)
				sb.FieldBuilder(1).(*array.StringBuilder).Append(tu.Content)
				if tu.ToolCalls != nil {
					sb.FieldBuilder(2).(*array.StringBuilder).Append(*tu.ToolCalls)
				} else {
					sb.FieldBuilder(2).AppendNull()
				}
			}
		}
	}
	return c
}

// env_outcome must be a JSON object.
func TestEnvOutcomeIsAnObject(t *testing.T) {
	for _, o := range []string{"[1]", "{", "null"} {
		var buf bytes.Buffer
		err := Write(&buf, Trajectories, []Trajectory{{PromptID: "p", Status: StatusOK, EnvOutcome: &o}}, nil)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("is not a JSON object")) {
			t.Errorf("env_outcome %s: %v", o, err)
		}
	}
}

func TestEpisodeMaskMustMatchItsSequence(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf, Trajectories, []Trajectory{{PromptID: "p", Status: StatusOK, Sequence: []int32{1, 2, 3}, Trainable: []int32{0, 1}}}, nil)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("sequence_ids has 3 tokens and trainable 2")) {
		t.Errorf("a mask shorter than its sequence: %v", err)
	}
}

// ReplyTokens are the runs of trainable tokens of an episode's sequence,
// one per reply; nil without a sequence.
func TestReplyTokens(t *testing.T) {
	for _, c := range []struct {
		mask []int32
		want []int
	}{
		{nil, nil},
		{[]int32{0, 0, 1, 1, 0, 1, 1, 1}, []int{2, 3}},
		{[]int32{1, 0, 0, 1}, []int{1, 1}},
		{[]int32{0, 0}, nil},
	} {
		tr := Trajectory{Trainable: c.mask, Sequence: make([]int32, len(c.mask))}
		if got := tr.ReplyTokens(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("mask %v: %v, want %v", c.mask, got, c.want)
		}
	}
}

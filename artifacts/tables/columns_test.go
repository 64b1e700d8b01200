package tables

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
)

// ReadOptions.Columns decodes only the columns named: the others are
// zero in Rows and null in Records; a name outside the table is an error.
func TestReaderColumns(t *testing.T) {
	rows := []Prompt{
		{PromptID: "a", Prompt: "one?", Answer: "1", Metadata: `{"k": 1}`, Source: "s", Split: "train",
			Messages: []Message{{Role: "user", Content: "one?"}}},
		{PromptID: "b", Prompt: "two?", Answer: "2", Source: "s", Split: "test"},
	}
	data := writeRows(t, Prompts, rows, nil)
	open := func(cols []string) (*Reader[Prompt], error) {
		return NewReader(bytes.NewReader(data), int64(len(data)), "prompts.parquet", Prompts, &ReadOptions{Columns: cols})
	}
	rd, err := open([]string{"answer", "prompt_id"})
	if err != nil {
		t.Fatal(err)
	}
	var got []Prompt
	for r, err := range rd.Rows(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	want := []Prompt{{PromptID: "a", Answer: "1"}, {PromptID: "b", Answer: "2"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rows = %#v, want %#v", got, want)
	}
	for rec, err := range rd.Records(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range rec.Schema().Fields() {
			read := f.Name == "prompt_id" || f.Name == "answer"
			if nulls := rec.Column(i).NullN(); read != (nulls == 0) || (!read && nulls != 2) {
				t.Errorf("column %s: %d nulls (read: %v)", f.Name, nulls, read)
			}
		}
	}
	_, err = open([]string{"prompt_id", "answr"})
	if !errors.Is(err, artifacts.ErrInvalid) || !strings.Contains(err.Error(), `names "answr", which is not a column of the prompts table`) ||
		!strings.Contains(err.Error(), "prompts.parquet") {
		t.Fatalf("unknown column: %v, want ErrInvalid naming the file and the column", err)
	}
}

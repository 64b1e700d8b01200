package tables

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rlpipe/rlpipe/artifacts"
)

// foreignFile writes rows given as JSON with an arbitrary Arrow schema and
// no rlpipe metadata, the way another tool would.
func foreignFile(t *testing.T, fields []arrow.Field, md map[string]string, rowsJSON string) []byte {
	t.Helper()
	return foreignFileWith(t, fields, md, rowsJSON, nil)
}

// foreignFileWith is foreignFile written with opts.
func foreignFileWith(t *testing.T, fields []arrow.Field, md map[string]string, rowsJSON string, opts *WriteOptions) []byte {
	t.Helper()
	var meta *arrow.Metadata
	if md != nil {
		m := arrow.MetadataFrom(md)
		meta = &m
	}
	sc := arrow.NewSchema(fields, meta)
	rec, _, err := array.RecordFromJSON(memory.NewGoAllocator(), sc, strings.NewReader(rowsJSON))
	if err != nil {
		t.Fatalf("build record: %v", err)
	}
	defer rec.Release()
	var buf bytes.Buffer
	w, err := NewRecordWriter(&buf, sc, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// advantageFields are the advantages columns, which tests then alter.
func advantageFields() []arrow.Field {
	return Advantages.Schema().Fields()
}

func replaceField(fields []arrow.Field, name string, f arrow.Field) []arrow.Field {
	out := make([]arrow.Field, 0, len(fields))
	for _, x := range fields {
		if x.Name == name {
			if f.Name == "" {
				continue // drop
			}
			x = f
		}
		out = append(out, x)
	}
	return out
}

const advRow = `[{"prompt_id":"p","sample_index":1,"advantage":0.5,"group_mean":0,"group_std":1,"group_size":4,"mask":false,"reason":""}]`

func TestReadRejectsBadFiles(t *testing.T) {
	good := writeRows(t, Advantages, []Advantage{{PromptID: "p", GroupSize: 4}}, nil)
	prompts := writeRows(t, Prompts, []Prompt{{PromptID: "p"}}, nil)

	type tc struct {
		name   string
		data   []byte
		isErr  error
		expect []string // substrings of the message
	}
	cases := []tc{
		{"empty file", nil, ErrNotParquet, []string{`"bad.parquet"`}},
		{"not parquet", []byte("prompt_id,prompt\np1,hello\n"), ErrNotParquet, []string{`"bad.parquet"`}},
		{"truncated footer", good[:len(good)-10], ErrNotParquet, []string{`"bad.parquet"`}},
		{"truncated half", good[:len(good)/2], ErrNotParquet, []string{`"bad.parquet"`}},
		{"header only", good[:4], ErrNotParquet, []string{`"bad.parquet"`}},
		{"another table", prompts, ErrSchemaMismatch, []string{`"bad.parquet"`, "want table advantages", "found table prompts"}},
		{"newer version", foreignFile(t, advantageFields(), map[string]string{MetaTable: AdvantagesName, MetaSchemaVersion: "2"}, advRow),
			ErrSchemaMismatch, []string{"schema version 2", "upgrade"}},
		{"missing column", foreignFile(t, replaceField(advantageFields(), "group_size", arrow.Field{}), nil,
			`[{"prompt_id":"p","sample_index":1,"advantage":0.5,"group_mean":0,"group_std":1,"mask":false,"reason":""}]`),
			ErrSchemaMismatch, []string{`"bad.parquet"`, "advantages", `column "group_size"`, "int32", "missing"}},
		{"wrong type", foreignFile(t, replaceField(advantageFields(), "sample_index", arrow.Field{Name: "sample_index", Type: arrow.PrimitiveTypes.Int64}), nil, advRow),
			ErrSchemaMismatch, []string{`"bad.parquet"`, "advantages", `column "sample_index"`, "want int32, found int64", "cast"}},
		{"float for bool", foreignFile(t, replaceField(advantageFields(), "mask", arrow.Field{Name: "mask", Type: arrow.PrimitiveTypes.Float64}), nil,
			strings.Replace(advRow, `"mask":false`, `"mask":0`, 1)),
			ErrSchemaMismatch, []string{`column "mask"`, "want bool, found float64"}},
		{"null in required column", foreignFile(t, replaceField(advantageFields(), "prompt_id", arrow.Field{Name: "prompt_id", Type: arrow.BinaryTypes.String, Nullable: true}), nil,
			strings.Replace(advRow, `"prompt_id":"p"`, `"prompt_id":null`, 1)),
			ErrSchemaMismatch, []string{`column "prompt_id"`, "null at row 0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(c.data), int64(len(c.data)), "bad.parquet", Advantages)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, c.isErr) || !errors.Is(err, artifacts.ErrInvalid) {
				t.Errorf("error %q is not %v and ErrInvalid", err, c.isErr)
			}
			for _, s := range c.expect {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
}

func TestReadRejectsNestedMismatch(t *testing.T) {
	traj := Trajectories.Schema().Fields()
	for _, c := range []struct {
		name   string
		field  arrow.Field
		expect string
	}{
		{"list element type", arrow.Field{Name: "token_ids", Type: listOf(arrow.PrimitiveTypes.Int64), Nullable: true},
			`column "token_ids.element": want int32, found int64`},
		{"struct field missing", arrow.Field{Name: "turns", Type: listOf(arrow.StructOf(
			arrow.Field{Name: "role", Type: arrow.BinaryTypes.String},
			arrow.Field{Name: "content", Type: arrow.BinaryTypes.String}))},
			`column "turns.element.tool_calls" (utf8) is missing`},
		{"list as string", arrow.Field{Name: "logprobs", Type: arrow.BinaryTypes.String, Nullable: true},
			`column "logprobs": want list<element: float32, nullable>`},
	} {
		t.Run(c.name, func(t *testing.T) {
			fields := replaceField(traj, c.field.Name, c.field)
			data := foreignFile(t, fields, nil, `[{"prompt_id":"p","status":"ok"}]`)
			_, err := NewReader(bytes.NewReader(data), int64(len(data)), "t.parquet", Trajectories, nil)
			if !errors.Is(err, ErrSchemaMismatch) {
				t.Fatalf("err = %v, want ErrSchemaMismatch", err)
			}
			var se *SchemaError
			if !errors.As(err, &se) || se.Table != TrajectoriesName || se.File != "t.parquet" {
				t.Errorf("err = %#v", err)
			}
			if !strings.Contains(err.Error(), strings.TrimSuffix(c.expect, ", nullable>")) {
				t.Errorf("error %q lacks %q", err, c.expect)
			}
		})
	}
}

// A file from another tool with the right columns is accepted: no rlpipe
// metadata, another column order, extra columns, nullable columns without
// nulls, large strings and lists, dictionary-encoded strings.
func TestReadAcceptsForeignFile(t *testing.T) {
	fields := []arrow.Field{
		{Name: "extra", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "status", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}, Nullable: true},
		{Name: "sample_index", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "prompt_id", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "group_id", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "completion", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "turns", Type: arrow.LargeListOf(arrow.StructOf(
			arrow.Field{Name: "tool_calls", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "content", Type: arrow.BinaryTypes.LargeString, Nullable: true},
			arrow.Field{Name: "role", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		)), Nullable: true},
		{Name: "token_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "logprobs", Type: arrow.LargeListOf(arrow.PrimitiveTypes.Float32), Nullable: true},
		{Name: "finish_reason", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "num_tokens", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "policy_version", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "sampler", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "seed", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "staleness", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "error", Type: arrow.BinaryTypes.String, Nullable: true},
	}
	rows := `[
	 {"extra":1.5,"status":"ok","sample_index":2,"prompt_id":"p1","group_id":"g","completion":"ça va",
	  "turns":[{"tool_calls":null,"content":"hi","role":"user","extra":3},{"tool_calls":"[]","content":"yo","role":"assistant"}],
	  "token_ids":[5,6],"logprobs":[],"finish_reason":"stop","num_tokens":2,"policy_version":"v","sampler":"{}","seed":7,"staleness":0,"error":null},
	 {"status":"timeout","sample_index":3,"prompt_id":"p2","group_id":"","completion":"","turns":[],"token_ids":null,"logprobs":null,
	  "finish_reason":"","num_tokens":0,"policy_version":"","sampler":"","seed":0,"staleness":1,"error":"slow"}
	]`
	data := foreignFile(t, fields, map[string]string{"pandas": "{}"}, rows)
	got := readRows(t, Trajectories, data)
	want := []Trajectory{
		{PromptID: "p1", SampleIndex: 2, GroupID: "g", Completion: "ça va",
			Turns:    []Turn{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "yo", ToolCalls: ptr("[]")}},
			TokenIDs: []int32{5, 6}, Logprobs: []float32{}, FinishReason: "stop", NumTokens: 2, PolicyVersion: "v", Sampler: "{}", Seed: 7, Status: "ok"},
		{PromptID: "p2", SampleIndex: 3, Staleness: 1, Status: "timeout", Error: ptr("slow")},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows", len(got))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("row %d:\n got  %#v\n want %#v", i, got[i], want[i])
		}
	}
	// Records are conformed to the canonical schema.
	rd, err := NewReader(bytes.NewReader(data), int64(len(data)), "f", Trajectories, nil)
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range rd.Records(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Schema().Equal(Trajectories.Schema()) {
			t.Errorf("record schema\n%s\nwant\n%s", rec.Schema(), Trajectories.Schema())
		}
	}
}

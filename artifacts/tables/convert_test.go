package tables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rlpipe/rlpipe/artifacts"
)

func importText(t *testing.T, text string, opts *ImportOptions) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	_, err := Import(&buf, strings.NewReader(text), "in", opts)
	return buf.Bytes(), err
}

func openBytes(t *testing.T, data []byte) *File {
	t.Helper()
	f, err := OpenFile(bytes.NewReader(data), int64(len(data)), "out", nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestImportKnownTable(t *testing.T) {
	t.Run("jsonl prompts", func(t *testing.T) {
		in := `{"prompt_id":"p1","prompt":"2+2?","answer":"4","metadata":{"level":1},"source":"s","split":"train"}

{"prompt_id":"p2","prompt":"","messages":[{"role":"user","content":"héllo"}],"answer":"","metadata":"{}","source":"","split":"test","messages_extra":null}
`
		_, err := importText(t, in, &ImportOptions{Table: PromptsName})
		var ve *ValueError
		if !errors.As(err, &ve) || ve.Line != 3 || ve.Column != "messages_extra" {
			t.Fatalf("err = %v, want line 3 column messages_extra", err)
		}
		in = strings.Replace(in, `,"messages_extra":null`, "", 1)
		data, err := importText(t, in, &ImportOptions{Table: PromptsName})
		if err != nil {
			t.Fatal(err)
		}
		got := readRows(t, Prompts, data)
		want := []Prompt{
			{PromptID: "p1", Prompt: "2+2?", Answer: "4", Metadata: `{"level":1}`, Source: "s", Split: "train"},
			{PromptID: "p2", Messages: []Message{{Role: "user", Content: "héllo"}}, Metadata: "{}", Split: "test"},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %#v\nwant %#v", got, want)
		}
	})
	t.Run("csv rewards with components", func(t *testing.T) {
		in := "prompt_id,sample_index,r_correct,r_len,total,spec_digest,verifier_outputs,judge_outputs,status,error\n" +
			"p,0,1,0.25,1.25,d,{},{},ok,\n" +
			"p,1,,-1,-1,d,\"{\"\"x\"\":1}\",{},error,boom\n"
		data, err := importText(t, in, &ImportOptions{Table: RewardsName, Format: CSV})
		if err != nil {
			t.Fatal(err)
		}
		got := readRows(t, Rewards, data)
		want := []Reward{
			{PromptID: "p", Components: map[string]float64{"correct": 1, "len": 0.25}, Total: 1.25, SpecDigest: "d", VerifierOutputs: "{}", JudgeOutputs: "{}", Status: "ok"},
			{PromptID: "p", SampleIndex: 1, Components: map[string]float64{"len": -1}, Total: -1, SpecDigest: "d", VerifierOutputs: `{"x":1}`, JudgeOutputs: "{}", Status: "error", Error: ptr("boom")},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %#v\nwant %#v", got, want)
		}
	})
}

func TestImportErrors(t *testing.T) {
	const adv = `{"prompt_id":"p","sample_index":0,"advantage":0.5,"group_mean":0,"group_std":1,"group_size":4,"mask":false,"reason":""}` + "\n"
	for _, c := range []struct {
		name   string
		in     string
		opts   ImportOptions
		line   int64
		column string
		expect string
	}{
		{"string for int", adv + strings.Replace(adv, `"sample_index":0`, `"sample_index":"zero"`, 1), ImportOptions{Table: AdvantagesName}, 2, "sample_index", `want int32, found "zero"`},
		{"int32 overflow", strings.Replace(adv, `"group_size":4`, `"group_size":4294967296`, 1), ImportOptions{Table: AdvantagesName}, 1, "group_size", "not an int32"},
		{"float for int", strings.Replace(adv, `"group_size":4`, `"group_size":4.5`, 1), ImportOptions{Table: AdvantagesName}, 1, "group_size", "not an int32"},
		{"number for string", strings.Replace(adv, `"prompt_id":"p"`, `"prompt_id":7`, 1), ImportOptions{Table: AdvantagesName}, 1, "prompt_id", "quote it"},
		{"null in required", strings.Replace(adv, `"mask":false`, `"mask":null`, 1), ImportOptions{Table: AdvantagesName}, 1, "mask", "required"},
		{"missing required", strings.Replace(adv, `,"reason":""`, ``, 1), ImportOptions{Table: AdvantagesName}, 1, "reason", "required"},
		{"unknown column", strings.Replace(adv, `"reason"`, `"reasn"`, 1), ImportOptions{Table: AdvantagesName}, 1, "reasn", "not a column of table advantages"},
		{"bad nested", `{"prompt_id":"p","messages":[{"role":"user","text":"x"}]}`, ImportOptions{Table: PromptsName}, 1, "messages", `element 0: unknown field "text"`},
		{"csv missing header column", "prompt_id,sample_index\np,1\n", ImportOptions{Table: AdvantagesName, Format: CSV}, 1, "advantage", "missing from the header"},
		{"csv bad bool", "prompt_id,sample_index,advantage,group_mean,group_std,group_size,mask,reason\np,1,0,0,0,1,maybe,\n", ImportOptions{Table: AdvantagesName, Format: CSV}, 2, "mask", "not true or false"},
		{"inferred type broken later", "{\"n\":1}\n{\"n\":2}\n{\"n\":2.5}\n", ImportOptions{InferRows: 2}, 3, "n", "raise InferRows"},
		{"string among ints", "{\"n\":1}\n{\"n\":null}\n{\"n\":2}\n{\"n\":\"seven\"}\n", ImportOptions{}, 4, "n",
			`want int64, found "seven": the column holds int64 values from line 1 on, and a column holds one type (to import it as text, quote its values, or name it a string column: rlpipe import --string n)`},
		{"int among strings", "{\"id\":\"a\"}\n{\"id\":7}\n", ImportOptions{}, 2, "id", `want string, found 7: the column holds string values from line 1 on`},
		{"bool among floats", "{\"x\":1.5}\n{\"x\":2}\n{\"x\":true}\n", ImportOptions{}, 3, "x", `want float64, found true: the column holds float64 values from line 1 on`},
		{"int among strings after the sample", "{\"id\":\"a\"}\n{\"id\":7}\n", ImportOptions{InferRows: 1}, 2, "id", "a number where text is expected"},
		{"csv word among ints", "id,n\na,1\nb,2\nc,three\n", ImportOptions{Format: CSV}, 4, "n",
			`want int64, found "three": the column holds int64 values from line 2 on, and a column holds one type (to import it as text, name it a string column: rlpipe import --string n)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := importText(t, c.in, &c.opts)
			var ve *ValueError
			if !errors.As(err, &ve) || !errors.Is(err, ErrBadValue) {
				t.Fatalf("err = %v, want a *ValueError", err)
			}
			if ve.Line != c.line || ve.Column != c.column || !strings.Contains(err.Error(), c.expect) {
				t.Errorf("err = %q (line %d column %q), want line %d column %q containing %q", err, ve.Line, ve.Column, c.line, c.column, c.expect)
			}
		})
	}
	if _, err := importText(t, "not json\n", nil); !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("not JSON: err = %v", err)
	}
}

// TestImportNoRows: an input without a row, or whose rows hold no
// column, is an ErrNoRows naming the input and saying what a row looks
// like, in every format and with or without a table, and nothing is
// written (it used to panic on an empty schema).
func TestImportNoRows(t *testing.T) {
	const (
		jsonlHint = `import in: no rows: the file is empty or holds only blank lines; write one JSON object per line, e.g. {"prompt_id":"p1","prompt":"2+2="}`
		csvHint   = "import in: no rows: the file is empty or holds only blank lines; write a header line of column names, then one line of values per row"
	)
	for _, c := range []struct {
		name string
		in   string
		opts ImportOptions
		want string
	}{
		{"empty jsonl", "", ImportOptions{}, jsonlHint},
		{"blank lines", "\n  \n\t\r\n\n", ImportOptions{}, jsonlHint},
		{"no final newline", "   ", ImportOptions{}, jsonlHint},
		{"empty jsonl into a table", "", ImportOptions{Table: PromptsName}, jsonlHint},
		{"empty objects", "\n{}\n{ }\n", ImportOptions{},
			"import in: no rows with a column: every line is an empty JSON object {} (the first at line 2); give each line the row's keys and values"},
		{"empty csv", "", ImportOptions{Format: CSV}, csvHint},
		{"blank csv", "\n\n", ImportOptions{Format: CSV}, csvHint},
		{"csv header alone", "prompt_id,prompt\n", ImportOptions{Format: CSV},
			"import in: no rows: the file holds a header (prompt_id,prompt) and no records below it; add one line of values per row"},
		{"csv header alone into a table", "prompt_id,prompt,answer,metadata,source,split\n", ImportOptions{Format: CSV, Table: PromptsName},
			"import in: no rows: the file holds a header (prompt_id,prompt,answer,metadata,source,split) and no records below it; add one line of values per row"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			n, err := Import(&buf, strings.NewReader(c.in), "in", &c.opts)
			if !errors.Is(err, ErrNoRows) || !errors.Is(err, artifacts.ErrInvalid) {
				t.Fatalf("err = %v, want ErrNoRows", err)
			}
			if err.Error() != c.want {
				t.Errorf("err = %q\nwant  %q", err, c.want)
			}
			if n != 0 || buf.Len() != 0 {
				t.Errorf("%d rows, %d bytes written; want nothing", n, buf.Len())
			}
		})
	}
}

func TestImportInfers(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		opts ImportOptions
	}{
		{"jsonl", `{"id":"a","n":1,"x":1,"ok":true,"tags":["t"],"obj":{"k":1}}
{"id":"b","n":2,"x":2.5,"ok":null,"note":"late"}
{"id":"c","n":null,"x":3,"ok":false,"tags":null}
`, ImportOptions{}},
		{"csv", "id,n,x,ok,tags,obj,note\na,1,1,true,\"[\"\"t\"\"]\",\"{\"\"k\"\":1}\",\nb,2,2.5,,,,late\nc,,3,false,,,\n", ImportOptions{Format: CSV}},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, err := importText(t, c.in, &c.opts)
			if err != nil {
				t.Fatal(err)
			}
			f := openBytes(t, data)
			wantTypes := map[string]arrow.DataType{
				"id": arrow.BinaryTypes.String, "n": arrow.PrimitiveTypes.Int64, "x": arrow.PrimitiveTypes.Float64,
				"ok": arrow.FixedWidthTypes.Boolean, "tags": arrow.BinaryTypes.String, "obj": arrow.BinaryTypes.String, "note": arrow.BinaryTypes.String,
			}
			if f.Schema().NumFields() != len(wantTypes) {
				t.Fatalf("schema %s", f.Schema())
			}
			for _, fl := range f.Schema().Fields() {
				if !arrow.TypeEqual(fl.Type, wantTypes[fl.Name]) {
					t.Errorf("column %s: %s, want %s", fl.Name, fl.Type, wantTypes[fl.Name])
				}
			}
			var rows []map[string]any
			for r, err := range f.Rows(context.Background()) {
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, r)
			}
			if len(rows) != 3 || rows[0]["tags"] != `["t"]` || rows[0]["obj"] != `{"k":1}` || rows[1]["x"] != 2.5 ||
				rows[2]["n"] != nil || rows[1]["note"] != "late" || rows[2]["ok"] != false || rows[0]["n"] != int64(1) {
				t.Errorf("rows %v", rows)
			}
		})
	}
}

// TestImportStringColumns imports columns whose values look like numbers
// or booleans as text when they are named string columns.
func TestImportStringColumns(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		opts ImportOptions
	}{
		{"jsonl", "{\"n\":1,\"id\":\"a\"}\n{\"n\":\"seven\",\"id\":true}\n{\"n\":2.5,\"id\":null}\n", ImportOptions{StringColumns: []string{"n", "id"}}},
		{"csv", "n,id\n1,a\nseven,true\n2.5,\n", ImportOptions{Format: CSV, StringColumns: []string{"n", "id"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, err := importText(t, c.in, &c.opts)
			if err != nil {
				t.Fatal(err)
			}
			f := openBytes(t, data)
			var got []string
			for r, err := range f.Rows(context.Background()) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprint(r["n"], "|", r["id"]))
			}
			if want := []string{"1|a", "seven|true", "2.5|<nil>"}; !reflect.DeepEqual(got, want) {
				t.Errorf("rows %q, want %q", got, want)
			}
		})
	}
	for _, c := range []struct {
		name, want string
		opts       ImportOptions
	}{
		{"with a table", `string column "n": a known table (prompts) fixes its columns' types`, ImportOptions{Table: PromptsName, StringColumns: []string{"n"}}},
		{"unknown column", `string column "m": no such column in the data (columns: n)`, ImportOptions{StringColumns: []string{"m"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := importText(t, "{\"n\":1}\n", &c.opts); !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want ErrInvalid saying %q", err, c.want)
			}
		})
	}
}

func TestExport(t *testing.T) {
	rows := []Trajectory{
		{PromptID: "p,1", SampleIndex: 2, Completion: "line1\nline2 \"q\" <b>", Turns: []Turn{{Role: "user", Content: "hi", ToolCalls: ptr(`[]`)},
			{Role: "assistant", Content: "yo", TokenIDs: []int32{1, 2}, Logprobs: []float32{-0.1, -0.2}, Status: StatusOK}},
			TokenIDs: []int32{1, 2}, Logprobs: []float32{-0.1}, Seed: 9, Status: StatusOK},
		{PromptID: "p2", Status: StatusTimeout, Error: ptr("slow")},
	}
	data := writeRows(t, Trajectories, rows, nil)
	f := openBytes(t, data)

	var jl bytes.Buffer
	if err := Export(context.Background(), &jl, f, JSONL); err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(jl.String(), "\n", 2)[0]
	wantFirst := `{"prompt_id":"p,1","sample_index":2,"group_id":"","completion":"line1\nline2 \"q\" <b>",` +
		`"turns":[{"role":"user","content":"hi","tool_calls":"[]","token_ids":null,"logprobs":null,"status":null},` +
		`{"role":"assistant","content":"yo","tool_calls":null,"token_ids":[1,2],"logprobs":[-0.1,-0.2],"status":"ok"}],"token_ids":[1,2],"logprobs":[-0.1],"finish_reason":"",` +
		`"num_tokens":0,"policy_version":"","sampler":"","seed":9,"staleness":0,"status":"ok","error":null,"sequence_ids":null,"trainable":null,"env_outcome":null}`
	if first != wantFirst {
		t.Errorf("jsonl row\n got  %s\n want %s", first, wantFirst)
	}
	// JSONL export imports back to the same rows.
	back, err := importText(t, jl.String(), &ImportOptions{Table: TrajectoriesName})
	if err != nil {
		t.Fatal(err)
	}
	if got := readRows(t, Trajectories, back); !reflect.DeepEqual(got, rows) {
		t.Errorf("jsonl round trip:\n got  %#v\n want %#v", got, rows)
	}

	var cv bytes.Buffer
	if err := Export(context.Background(), &cv, f, CSV); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(cv.String(), "\n")
	if lines[0] != "prompt_id,sample_index,group_id,completion,turns,token_ids,logprobs,finish_reason,num_tokens,policy_version,sampler,seed,staleness,status,error,sequence_ids,trainable,env_outcome" {
		t.Errorf("csv header %q", lines[0])
	}
	back, err = importText(t, cv.String(), &ImportOptions{Table: TrajectoriesName, Format: CSV})
	if err != nil {
		t.Fatal(err)
	}
	got := readRows(t, Trajectories, back)
	// CSV cannot tell a null list from an empty cell: both read as null.
	if !reflect.DeepEqual(got, rows) {
		t.Errorf("csv round trip:\n got  %#v\n want %#v", got, rows)
	}
}

func TestFormatOf(t *testing.T) {
	for name, want := range map[string]Format{"a.jsonl": JSONL, "b.NDJSON": JSONL, "c.csv": CSV} {
		if got, err := FormatOf(name); err != nil || got != want {
			t.Errorf("FormatOf(%q) = %q, %v", name, got, err)
		}
	}
	if _, err := FormatOf("x.parquet"); err == nil {
		t.Error("FormatOf(x.parquet): no error")
	}
}

package datasets_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments/datasets"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// GSM8K-shaped lines, written for these tests.
const gsm8kLines = `{"question": "Tom has 3 boxes of 12 pens. He gives away 5 pens. How many pens does he have left?", "answer": "Tom has 3*12=<<3*12=36>>36 pens.\nHe has 36-5=<<36-5=31>>31 left.\n#### 31"}
{"question": "A farm sells 1,200 eggs a day at $0.25 each. How much money does it make in 10 days?", "answer": "Each day: 1200*0.25=<<1200*0.25=300>>300 dollars.\nIn 10 days: 300*10=<<300*10=3000>>3000.\n#### 3,000"}

{"question": "It is 5 degrees and the temperature falls by 12 degrees. What is it now?", "answer": "5-12=<<5-12=-7>>-7\n#### -7"}
`

func contentID(prefix, q, a string) string {
	h := sha256.Sum256([]byte(q + "\x00" + a))
	return prefix + hex.EncodeToString(h[:])[:16]
}

func TestReadJSONLGSM8K(t *testing.T) {
	rows, err := datasets.ReadJSONL(strings.NewReader(gsm8kLines), "data/gsm8k.jsonl",
		&datasets.Options{AnswerFormat: datasets.AnswerGSM8K})
	if err != nil {
		t.Fatal(err)
	}
	q0 := "Tom has 3 boxes of 12 pens. He gives away 5 pens. How many pens does he have left?"
	a0 := "Tom has 3*12=<<3*12=36>>36 pens.\nHe has 36-5=<<36-5=31>>31 left.\n#### 31"
	want0 := tables.Prompt{
		PromptID: contentID("gsm8k-", q0, a0),
		Prompt:   q0,
		Answer:   "31",
		Metadata: `{"reasoning":"Tom has 3*12=\u003c\u003c3*12=36\u003e\u003e36 pens.\nHe has 36-5=\u003c\u003c36-5=31\u003e\u003e31 left."}`,
		Source:   "gsm8k",
		Split:    "train",
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	if !reflect.DeepEqual(rows[0], want0) {
		t.Errorf("row 0\n got %+v\nwant %+v", rows[0], want0)
	}
	if rows[0].PromptID != "gsm8k-a1d49425949373e9" {
		t.Errorf("id %q changed: content ids must stay stable", rows[0].PromptID)
	}
	for i, want := range []string{"31", "3000", "-7"} {
		if rows[i].Answer != want {
			t.Errorf("row %d answer %q, want %q", i, rows[i].Answer, want)
		}
	}
}

func TestParseGSM8K(t *testing.T) {
	for _, c := range []struct {
		in, final, reasoning, err string
	}{
		{"a\n#### 42", "42", "a", ""},
		{"#### 1,234,567", "1234567", "", ""},
		{"x #### 1 #### 2.5", "2.5", "x #### 1", ""},
		{"so\n####   -3 ", "-3", "so", ""},
		{"no marker 42", "", "", `no "#### <number>" final answer`},
		{"r #### forty", "", "", `final answer "forty" after "####" is not a number`},
		{"r ####", "", "", `final answer "" after "####" is not a number`},
		{"r #### 1.", "", "", `final answer "1." after "####" is not a number`},
	} {
		t.Run(c.in, func(t *testing.T) {
			final, reasoning, err := datasets.ParseGSM8K(c.in)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || final != c.final || reasoning != c.reasoning {
				t.Fatalf("got %q, %q, %v; want %q, %q", final, reasoning, err, c.final, c.reasoning)
			}
		})
	}
}

// parquetOf converts JSONL to a Parquet file with inferred column types,
// the named ones strings.
func parquetOf(t *testing.T, jsonl string, asText ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := tables.Import(&buf, strings.NewReader(jsonl), "test.jsonl", &tables.ImportOptions{StringColumns: asText}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const mathLines = `{"id": 7, "problem": "What is $2^5$?", "solution": "32", "level": "Level 1"}
{"id": 9, "problem": "Solve $x+1=3$.", "solution": 2, "level": "Level 2"}
`

// The same rows come from JSONL and from Parquet, with a field mapping.
func TestFieldMapping(t *testing.T) {
	opts := &datasets.Options{Fields: datasets.Fields{ID: "id", Question: "problem", Answer: "solution"}, Split: "test", Source: "math"}
	fromJSONL, err := datasets.ReadJSONL(strings.NewReader(mathLines), "math.jsonl", opts)
	if err != nil {
		t.Fatal(err)
	}
	// "solution" is a string in one line, a number in the other: the
	// import must be told it is a string column, as a user must.
	pq := parquetOf(t, mathLines, "solution")
	fromParquet, err := datasets.ReadParquet(bytes.NewReader(pq), int64(len(pq)), "math.parquet", opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []tables.Prompt{
		{PromptID: "7", Prompt: "What is $2^5$?", Answer: "32", Metadata: `{"level":"Level 1"}`, Source: "math", Split: "test"},
		{PromptID: "9", Prompt: "Solve $x+1=3$.", Answer: "2", Metadata: `{"level":"Level 2"}`, Source: "math", Split: "test"},
	}
	if !reflect.DeepEqual(fromJSONL, want) {
		t.Errorf("JSONL\n got %+v\nwant %+v", fromJSONL, want)
	}
	if !reflect.DeepEqual(fromParquet, want) {
		t.Errorf("Parquet\n got %+v\nwant %+v", fromParquet, want)
	}
}

// Tasks without a reference answer (an agent's, judged by a verifier):
// every other column is metadata, the answer empty; an answer column
// named at the same time is an error.
func TestNoAnswer(t *testing.T) {
	const tasks = `{"id": "fix", "instruction": "fix it", "verifier": "true", "checks": {"a.txt": "1"}}` + "\n"
	opts := &datasets.Options{Fields: datasets.Fields{ID: "id", Question: "instruction", NoAnswer: true}}
	got, err := datasets.ReadJSONL(strings.NewReader(tasks), "tasks.jsonl", opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []tables.Prompt{{PromptID: "fix", Prompt: "fix it", Metadata: `{"checks":{"a.txt":"1"},"verifier":"true"}`, Source: "tasks", Split: "train"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	opts.Fields.Answer = "verifier"
	if _, err := datasets.ReadJSONL(strings.NewReader(tasks), "tasks.jsonl", opts); err == nil ||
		err.Error() != `load tasks.jsonl: an answer column ("verifier") and no answer at once: invalid dataset: invalid argument` {
		t.Errorf("an answer column with no answer: %v", err)
	}
}

func TestRowErrors(t *testing.T) {
	gsm := &datasets.Options{AnswerFormat: datasets.AnswerGSM8K}
	withID := &datasets.Options{Fields: datasets.Fields{ID: "id"}}
	for _, c := range []struct {
		name  string
		input string
		opts  *datasets.Options
		jsonl string // the JSONL error; "" when the input is not valid JSONL for Parquet
		pq    string // the Parquet error; "" to skip
	}{
		{"missing answer", `{"question":"q1","answer":"1"}` + "\n" + `{"question":"q2"}`, nil,
			`load in.jsonl line 2 column "answer": missing (the row has "question"); name the answer column with --answer, or read none with --no-answer`,
			`load in.parquet row 1 column "answer": null`},
		{"null question", `{"question":null,"answer":"1"}`, nil,
			`load in.jsonl line 1 column "question": null`, ""},
		{"number question", `{"question":5,"answer":"1"}`, nil,
			`load in.jsonl line 1 column "question": want a string, found the number 5`,
			`load in.parquet row 0 column "question": want a string, found the number 5`},
		{"empty question", `{"question":" ","answer":"1"}`, nil,
			`load in.jsonl line 1 column "question": empty`,
			`load in.parquet row 0 column "question": empty`},
		{"not an object", "\n[1,2]", nil, `load in.jsonl line 2: not a JSON object: [1,2]`, ""},
		{"two values", `{"question":"q","answer":"1"} {}`, nil, `load in.jsonl line 1: more than one JSON value on the line`, ""},
		{"no final answer", `{"question":"q","answer":"it is 4"}`, gsm,
			`load in.jsonl line 1 column "answer": no "#### <number>" final answer`,
			`load in.parquet row 0 column "answer": no "#### <number>" final answer`},
		{"duplicate id", `{"id":"a","question":"q","answer":"1"}` + "\n" + `{"id":"a","question":"r","answer":"2"}`, withID,
			`load in.jsonl line 2 column "id": id "a" already used at line 1`,
			`load in.parquet row 1 column "id": id "a" already used at row 0`},
		{"duplicate content", `{"question":"q","answer":"1"}` + "\n" + `{"question":"q","answer":"1"}`, nil,
			`load in.jsonl line 2 column "question": same question and answer as line 1 (id in-f7aeca352e4931d7)`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := datasets.ReadJSONL(strings.NewReader(c.input), "in.jsonl", c.opts)
			checkRowError(t, err, c.jsonl)
			if c.pq == "" {
				return
			}
			pq := parquetOf(t, c.input)
			_, err = datasets.ReadParquet(bytes.NewReader(pq), int64(len(pq)), "in.parquet", c.opts)
			checkRowError(t, err, c.pq)
		})
	}
}

func checkRowError(t *testing.T, err error, want string) {
	t.Helper()
	var re *datasets.RowError
	if !errors.As(err, &re) || !errors.Is(err, datasets.ErrInvalid) || !errors.Is(err, artifacts.ErrInvalid) {
		t.Fatalf("error %v is not a *RowError wrapping ErrInvalid", err)
	}
	if err.Error() != want {
		t.Fatalf("error\n got %s\nwant %s", err, want)
	}
}

func TestFileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, path string
		opts       *datasets.Options
		want       string
	}{
		{"unknown extension", write("a.csv", "question,answer\n"), nil, "unknown extension"},
		{"missing file", filepath.Join(dir, "none.jsonl"), nil, "no such file"},
		{"not parquet", write("b.parquet", "PAR1 nope"), nil, "not a readable parquet file"},
		{"no such column", write("c.parquet", string(parquetOf(t, mathLines, "solution"))), nil, `no column "question" (columns: id, problem, solution, level)`},
		{"bad format", write("d.jsonl", ""), &datasets.Options{AnswerFormat: "math"}, `unknown answer format "math"`},
		{"one column twice", write("e.jsonl", ""), &datasets.Options{Fields: datasets.Fields{Question: "q", Answer: "q"}}, "name one column twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := datasets.Load(c.path, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
				t.Fatalf("Load(%s) = %v; want an error naming the file and saying %q", c.path, err, c.want)
			}
		})
	}
}

func TestImport(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	src := filepath.Join(t.TempDir(), "train.jsonl")
	if err := os.WriteFile(src, []byte(gsm8kLines), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := &datasets.ImportOptions{
		Load: datasets.Options{AnswerFormat: datasets.AnswerGSM8K, Source: "gsm8k"},
		Put:  datasets.PutOptions{Commit: &artifacts.CommitOptions{Date: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}},
	}
	c, n, err := datasets.Import(ctx, st, "main", "data/gsm8k/train.parquet", src, opts)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(gsm8kLines))
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if n != 3 || c.Message != "datasets: import train.jsonl (3 prompts, "+digest[:19]+") to data/gsm8k/train.parquet" {
		t.Fatalf("n %d, commit message %q", n, c.Message)
	}
	rc, info, err := st.GetObject(ctx, "main", "data/gsm8k/train.parquet")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	got, err := tables.Read(bytes.NewReader(b), int64(len(b)), "train.parquet", tables.Prompts)
	if err != nil {
		t.Fatal(err)
	}
	want, err := datasets.Load(src, &opts.Load)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stored rows differ from loaded rows:\n got %+v\nwant %+v", got, want)
	}
	prov, ok, err := artifacts.ProvenanceFromMetadata(info.Metadata)
	if err != nil || !ok {
		t.Fatalf("provenance: ok %v, %v", ok, err)
	}
	if prov.Task != datasets.ImportTask || prov.TaskVersion != datasets.ImportVersion ||
		prov.Inputs["train.jsonl"] != digest || !strings.HasPrefix(prov.ConfigHash, "sha256:") || prov.CreatedAt.IsZero() {
		t.Fatalf("provenance %+v", prov)
	}
	if info.ContentType != datasets.ContentType {
		t.Errorf("content type %q", info.ContentType)
	}
}

// TestImportNoRows: a file or a Hugging Face split without a row is
// refused with tables.ErrNoRows naming it, and nothing is put or
// committed.
func TestImportNoRows(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := local.Create(ctx, filepath.Join(dir, "store"), "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var empty bytes.Buffer
	if err := tables.Write(&empty, tables.Prompts, nil, nil); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	snap := filepath.Dir(filepath.Dir(write("snap/data/train-00000-of-00001.parquet", empty.String())))
	mapping := &datasets.ImportOptions{Load: datasets.Options{Fields: datasets.Fields{Question: "prompt"}}}
	fileHint := ": no rows: the file is empty (or holds only blank lines, or a Parquet schema alone); check that this is the dataset you meant"
	for _, c := range []struct {
		name string
		imp  func() (string, error)
		want string
	}{
		{"empty jsonl", func() (string, error) {
			p := write("empty.jsonl", "")
			_, _, err := datasets.Import(ctx, st, "main", "data/x.parquet", p, nil)
			return p, err
		}, fileHint},
		{"blank lines", func() (string, error) {
			p := write("blank.jsonl", "\n  \n")
			_, _, err := datasets.Import(ctx, st, "main", "data/x.parquet", p, nil)
			return p, err
		}, fileHint},
		{"parquet of no rows", func() (string, error) {
			p := write("empty.parquet", empty.String())
			_, _, err := datasets.Import(ctx, st, "main", "data/x.parquet", p, mapping)
			return p, err
		}, fileHint},
		{"empty hugging face split", func() (string, error) {
			_, _, _, err := datasets.ImportHF(ctx, st, "main", "data/x.parquet", snap, nil, mapping)
			return snap, err
		}, `: no rows: the split "train" (data/train-00000-of-00001.parquet) holds none; pick another with --split, or check that this is the dataset you meant`},
	} {
		t.Run(c.name, func(t *testing.T) {
			name, err := c.imp()
			if !errors.Is(err, tables.ErrNoRows) || !errors.Is(err, datasets.ErrInvalid) {
				t.Fatalf("err = %v, want tables.ErrNoRows and datasets.ErrInvalid", err)
			}
			if want := "import " + name + c.want; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("err = %q\nwant it to start %q", err, want)
			}
			if _, err := st.StatObject(ctx, "main", "data/x.parquet"); !errors.Is(err, artifacts.ErrNotFound) {
				t.Errorf("data/x.parquet after a failed import: %v, want not found", err)
			}
		})
	}
}

func TestPutRejectsDuplicateIDs(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	rows := []tables.Prompt{{PromptID: "a", Prompt: "1+1=", Answer: "2"}, {PromptID: "a", Prompt: "1+2=", Answer: "3"}}
	_, err := datasets.Put(ctx, st, "main", "p.parquet", rows, nil)
	if !errors.Is(err, datasets.ErrInvalid) || !strings.Contains(err.Error(), `rows 0 and 1 share the id "a"`) {
		t.Fatalf("Put = %v", err)
	}
}

func FuzzReadJSONL(f *testing.F) {
	f.Add(gsm8kLines, true)
	f.Add(mathLines, false)
	f.Add(`{"question":"q","answer":1e400}`, false)
	f.Fuzz(func(t *testing.T, in string, gsm bool) {
		opts := &datasets.Options{}
		if gsm {
			opts.AnswerFormat = datasets.AnswerGSM8K
		}
		rows, err := datasets.ReadJSONL(strings.NewReader(in), "fuzz.jsonl", opts)
		if err != nil {
			var re *datasets.RowError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a *RowError", err)
			}
			return
		}
		for _, r := range rows {
			if r.PromptID == "" || strings.TrimSpace(r.Prompt) == "" || r.Answer == "" {
				t.Fatalf("row %+v", r)
			}
		}
	})
}

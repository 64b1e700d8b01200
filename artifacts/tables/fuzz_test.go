package tables

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// FuzzReadParquet feeds arbitrary bytes to the readers: they must return
// an error or rows, never panic or hang.
func FuzzReadParquet(f *testing.F) {
	valid := fuzzSeed(f)
	f.Add(valid)
	f.Add(valid[:len(valid)-1])
	f.Add(valid[:len(valid)/2])
	f.Add([]byte("PAR1"))
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		if rd, err := NewReader(bytes.NewReader(data), int64(len(data)), "fuzz", Trajectories, &ReadOptions{BatchRows: 3}); err == nil {
			for _, err := range rd.Rows(ctx) {
				if err != nil {
					break
				}
			}
		}
		if f, err := OpenFile(bytes.NewReader(data), int64(len(data)), "fuzz", nil); err == nil {
			for _, err := range f.Rows(ctx) {
				if err != nil {
					break
				}
			}
		}
	})
}

func fuzzSeed(tb testing.TB) []byte {
	var buf bytes.Buffer
	err := Write(&buf, Trajectories, []Trajectory{
		{PromptID: "p", SampleIndex: 1, Completion: "abc", Turns: []Turn{{Role: "user", Content: "q", ToolCalls: ptr("[]")}},
			TokenIDs: []int32{1, 2}, Logprobs: []float32{-1}, Status: StatusOK},
		{PromptID: "q", Status: StatusTimeout, Error: ptr("slow")},
	}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzImport feeds arbitrary text to Import as JSONL and CSV, inferred
// and into a table: it must return an error or a file that opens with the
// rows it counted, never panic (an empty input once did).
func FuzzImport(f *testing.F) {
	for _, s := range []string{
		"", "\n \n", "{}\n", "{\"n\":1}\n{\"n\":2.5}\n", "a,b\n", "a,b\n1,x\n",
		`{"prompt_id":"p","prompt":"1+1=","answer":"2","metadata":"{}","source":"s","split":"train"}`,
	} {
		f.Add(s, false, false)
		f.Add(s, true, false)
		f.Add(s, false, true)
	}
	f.Fuzz(func(t *testing.T, in string, csv, table bool) {
		opts := &ImportOptions{InferRows: 2}
		if csv {
			opts.Format = CSV
		}
		if table {
			opts.Table = PromptsName
		}
		var buf bytes.Buffer
		n, err := Import(&buf, strings.NewReader(in), "fuzz", opts)
		if err != nil {
			return
		}
		out, err := OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "fuzz", nil)
		if err != nil {
			t.Fatalf("Import wrote %d rows that do not open: %v", n, err)
		}
		if n == 0 || out.NumRows() != n {
			t.Fatalf("Import counted %d rows, the file holds %d", n, out.NumRows())
		}
	})
}

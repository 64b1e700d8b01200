package datasets_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/rlpipe/rlpipe/environments/datasets"
)

// A dataset repository snapshot, as the hub cache keeps it, read without
// the network: the name and the revision come from its path.
func ExampleOpenHF() {
	root, _ := os.MkdirTemp("", "hf-example-")
	defer os.RemoveAll(root)
	snap := filepath.Join(root, "datasets--openai--gsm8k", "snapshots", "e53f048856ff4f594e959d75785d2c2d37b678ee")
	os.MkdirAll(filepath.Join(snap, "data"), 0o755)
	writeParquet(filepath.Join(snap, "data", "test-00000-of-00001.parquet"), []string{"What is 6 times 7?"}, []string{"6*7=42\n#### 42"})

	d, err := datasets.OpenHF(snap, &datasets.HFOptions{Split: "test"})
	if err != nil {
		fmt.Println(err)
		return
	}
	rows, err := d.Load(&datasets.Options{AnswerFormat: datasets.AnswerGSM8K})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d.Layout, d.Files)
	fmt.Println(rows[0].Prompt, rows[0].Answer, rows[0].Split)
	fmt.Println(rows[0].Source)
	// Output:
	// repository [data/test-00000-of-00001.parquet]
	// What is 6 times 7? 42 test
	// openai/gsm8k@e53f048856ff4f594e959d75785d2c2d37b678ee
}

// writeParquet writes a question/answer table, as a dataset repository
// holds one.
func writeParquet(path string, questions, answers []string) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "question", Type: arrow.BinaryTypes.String}, {Name: "answer", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues(questions, nil)
	b.Field(1).(*array.StringBuilder).AppendValues(answers, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	f, _ := os.Create(path)
	defer f.Close()
	w, _ := pqarrow.NewFileWriter(schema, f, nil, pqarrow.DefaultWriterProps())
	w.Write(rec)
	w.Close()
}

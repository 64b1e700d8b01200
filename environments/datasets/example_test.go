package datasets_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/environments/datasets"
)

func ExampleReadJSONL() {
	line := `{"question": "Ann has 2 apples and buys 3. How many?", "answer": "2+3=<<2+3=5>>5\n#### 5"}`
	rows, err := datasets.ReadJSONL(strings.NewReader(line), "gsm8k.jsonl",
		&datasets.Options{AnswerFormat: datasets.AnswerGSM8K})
	if err != nil {
		fmt.Println(err)
		return
	}
	r := rows[0]
	fmt.Println(r.PromptID, r.Answer, r.Split)
	fmt.Println(r.Metadata)
	// Output:
	// gsm8k-f056be77d3691db4 5 train
	// {"reasoning":"2+3=\u003c\u003c2+3=5\u003e\u003e5"}
}

func ExampleReadJSONL_fields() {
	line := `{"problem": "What is 6 times 7?", "solution": 42}`
	rows, err := datasets.ReadJSONL(strings.NewReader(line), "math.jsonl",
		&datasets.Options{Fields: datasets.ProblemSolution})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q %q\n", rows[0].Prompt, rows[0].Answer)
	// Output: "What is 6 times 7?" "42"
}

func ExampleImport() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "datasets-example-")
	defer os.RemoveAll(dir)
	st, err := local.Create(ctx, filepath.Join(dir, "store"), "main", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	src := filepath.Join(dir, "train.jsonl")
	os.WriteFile(src, []byte(`{"question": "1+1?", "answer": "#### 2"}`+"\n"), 0o644)
	_, n, err := datasets.Import(ctx, st, "main", "data/train.parquet", src,
		&datasets.ImportOptions{Load: datasets.Options{AnswerFormat: datasets.AnswerGSM8K}})
	fmt.Println(n, err)
	// Output: 1 <nil>
}

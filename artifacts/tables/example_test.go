package tables_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

func ExampleWrite() {
	rows := []tables.Advantage{
		{PromptID: "p1", SampleIndex: 0, Advantage: 1, GroupMean: 0.5, GroupStd: 0.5, GroupSize: 2},
		{PromptID: "p1", SampleIndex: 1, Advantage: -1, GroupMean: 0.5, GroupStd: 0.5, GroupSize: 2},
	}
	var buf bytes.Buffer
	if err := tables.Write(&buf, tables.Advantages, rows, nil); err != nil {
		fmt.Println(err)
		return
	}
	got, err := tables.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "advantages.parquet", tables.Advantages)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(got), got[1].Advantage)
	// Output: 2 -1
}

func ExampleNewWriter() {
	// Stream rows into a file in batches; memory stays bounded.
	f, err := os.CreateTemp("", "trajectories-*.parquet")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.Remove(f.Name())
	defer f.Close()
	w, err := tables.NewWriter(f, tables.Trajectories, &tables.WriteOptions{RowGroupRows: 10_000})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range 3 {
		err := w.Write(tables.Trajectory{PromptID: "p1", SampleIndex: int32(i), Completion: "42", Status: tables.StatusOK})
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := w.Close(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(w.NumRows())
	// Output: 3
}

func ExampleNewReader() {
	var buf bytes.Buffer
	_ = tables.Write(&buf, tables.Trajectories, []tables.Trajectory{
		{PromptID: "p1", Completion: "4", Status: tables.StatusOK},
		{PromptID: "p1", SampleIndex: 1, Status: tables.StatusTimeout},
	}, nil)

	rd, err := tables.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "trajectories.parquet", tables.Trajectories, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rd.Close()
	for row, err := range rd.Rows(context.Background()) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(row.SampleIndex, row.Status)
	}
	// Output:
	// 0 ok
	// 1 timeout
}

func ExampleNewReader_wrongTable() {
	var buf bytes.Buffer
	_ = tables.Write(&buf, tables.Prompts, []tables.Prompt{{PromptID: "p1"}}, nil)
	_, err := tables.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "data/prompts.parquet", tables.Trajectories, nil)
	fmt.Println(errors.Is(err, tables.ErrSchemaMismatch))
	fmt.Println(err)
	// Output:
	// true
	// read trajectories file "data/prompts.parquet": want table trajectories, found table prompts (read it as prompts)
}

func ExampleRewardsWith() {
	// Each reward component is a float64 column r_<name>.
	t, err := tables.RewardsWith("correct", "format")
	if err != nil {
		fmt.Println(err)
		return
	}
	var buf bytes.Buffer
	w, _ := tables.NewWriter(&buf, t, nil)
	_ = w.Write(tables.Reward{PromptID: "p1", Components: map[string]float64{"correct": 1, "format": 0.5}, Total: 1.5, Status: "ok"})
	_ = w.Close()
	rd, _ := tables.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "rewards.parquet", tables.Rewards, nil)
	fmt.Println(rd.Table().Dynamic())
	fmt.Println(rd.Schema().Field(2).Name, rd.Schema().Field(3).Name)
	// Output:
	// [correct format]
	// r_correct r_format
}

func ExampleOpenFile() {
	var buf bytes.Buffer
	_ = tables.Write(&buf, tables.EvalSummary, []tables.EvalSummaryRow{
		{Checkpoint: "it-3", Evalset: "aime", K: 8, N: 16, Metric: tables.MetricPassAtK, Value: 0.5, NumProblems: 30},
	}, nil)
	f, err := tables.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "summary.parquet", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	name, version := f.Table()
	fmt.Println(name, version, f.NumRows())
	for row, err := range f.Rows(context.Background()) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(row["metric"], row["value"], row["k"])
	}
	// Output:
	// eval_summary 1 1
	// pass@k 0.5 8
}

func ExampleImport() {
	in := `{"prompt_id":"p1","prompt":"2+2?","answer":"4","metadata":{"level":1},"source":"demo","split":"train"}
{"prompt_id":"p2","prompt":"3+3?","answer":"6","metadata":{},"source":"demo","split":"test"}
`
	var out bytes.Buffer
	n, err := tables.Import(&out, strings.NewReader(in), "prompts.jsonl", &tables.ImportOptions{Table: tables.PromptsName})
	if err != nil {
		fmt.Println(err)
		return
	}
	rows, _ := tables.Read(bytes.NewReader(out.Bytes()), int64(out.Len()), "prompts.parquet", tables.Prompts)
	fmt.Println(n, rows[0].Metadata)

	// A bad value names the line and column.
	bad := strings.Replace(in, `"prompt_id":"p2"`, `"prompt_id":2`, 1)
	_, err = tables.Import(&out, strings.NewReader(bad), "prompts.jsonl", &tables.ImportOptions{Table: tables.PromptsName})
	fmt.Println(err)
	// Output:
	// 2 {"level":1}
	// import prompts.jsonl line 2 column "prompt_id": want utf8, found 2: a number where text is expected (quote it)
}

func ExampleExport() {
	var buf bytes.Buffer
	_ = tables.Write(&buf, tables.Advantages, []tables.Advantage{{PromptID: "p1", GroupSize: 4, Mask: true, Reason: "timeout"}}, nil)
	f, _ := tables.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "advantages.parquet", nil)
	_ = tables.Export(context.Background(), os.Stdout, f, tables.CSV)
	_ = tables.Export(context.Background(), os.Stdout, f, tables.JSONL)
	// Output:
	// prompt_id,sample_index,advantage,group_mean,group_std,group_size,mask,reason
	// p1,0,0,0,0,4,true,timeout
	// {"prompt_id":"p1","sample_index":0,"advantage":0,"group_mean":0,"group_std":0,"group_size":4,"mask":true,"reason":"timeout"}
}

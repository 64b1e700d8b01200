package python_test

import (
	"context"
	"fmt"

	"github.com/rlpipe/rlpipe/rewards/python"
)

// A TRL-style reward function scores a batch in one call, in a sandbox;
// a row it returns None for is not scored.
func ExampleStart() {
	w, err := python.Start(context.Background(), python.Options{
		Python:    "/usr/bin/python3",
		Dir:       "testdata",
		Functions: []python.Function{{Name: "exact", Ref: "fns.py:exact"}, {Name: "none", Ref: "fns.py:none_on_empty"}},
	})
	if err != nil {
		fmt.Println(err) // a function that does not import: its traceback's last line
		return
	}
	defer w.Close()
	results, err := w.Score(context.Background(), "exact", python.Batch{
		Completions: []any{"4", " 5"},
		Prompts:     []any{"2+2?", "2+2?"},
		Columns:     map[string][]any{"answer": {"4", "4"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range results {
		fmt.Println(r.Status, r.Score)
	}
	results, _ = w.Score(context.Background(), "none", python.Batch{Completions: []any{""}})
	fmt.Println(results[0].Status, results[0].Reason)
	// Output:
	// ok 1
	// ok 0
	// error function none returned None: not scored
}

// Find says what a sandbox must see of an interpreter.
func ExampleFind() {
	in, err := python.Find(context.Background(), "/usr/bin/python3")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(in.Command, len(in.Binds), len(in.Mounts))
	// Output: /usr/bin/python3 0 0
}

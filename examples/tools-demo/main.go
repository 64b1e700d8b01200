// Command tools-demo writes the agentic demo's tasks as JSONL for
// `rlpipe dataset import`: train.jsonl, the 74 problems of the tool task
// outside tiny-tool's held-out split, and heldout.jsonl, the 26 in it
// (policy/tiny's ToolProblems). Each line is an agent task (the agent
// environment's prompt metadata, docs/ROLLOUTS.md):
//
//	{"id": "sum-7-5", "instruction": "Sum input.txt into answer.txt.",
//	 "files": {"input.txt": "7 5"}, "checks": {"answer.txt": "12"},
//	 "verifier": "…"}
//
// See README.md.
//
//	go run ./examples/tools-demo DIR
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/rlpipe/rlpipe/policy/tiny"
)

// Verifier passes when answer.txt holds the sum only the verifier sees,
// at /check/answer.txt (spaces and newlines aside); it runs in a sandbox
// of its own over the episode's final workspace.
const Verifier = `test -f answer.txt && test "$(tr -d ' \n' < answer.txt)" = "$(cat /check/answer.txt)"`

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tools-demo DIR (writes DIR/train.jsonl and DIR/heldout.jsonl)")
		os.Exit(2)
	}
	if err := os.MkdirAll(os.Args[1], 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "tools-demo:", err)
		os.Exit(1)
	}
	for _, f := range []struct {
		name    string
		heldOut bool
	}{{"train.jsonl", false}, {"heldout.jsonl", true}} {
		if err := writeTasks(filepath.Join(os.Args[1], f.name), problems(f.heldOut)); err != nil {
			fmt.Fprintln(os.Stderr, "tools-demo:", err)
			os.Exit(1)
		}
	}
}

// problems are the held-out split's (heldOut) or the others, in a fixed
// shuffled order, so that every batch mixes sums.
func problems(heldOut bool) []tiny.ToolProblem {
	ps := tiny.ToolProblems(heldOut)
	rng := rand.New(rand.NewPCG(1, 38))
	rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	return ps
}

type task struct {
	ID          string            `json:"id"`
	Instruction string            `json:"instruction"`
	Files       map[string]string `json:"files"`
	Checks      map[string]string `json:"checks"`
	Verifier    string            `json:"verifier"`
}

func writeTasks(path string, ps []tiny.ToolProblem) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write the tasks: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, p := range ps {
		t := task{ID: fmt.Sprintf("sum-%d-%d", p.A, p.B), Instruction: tiny.ToolInstruction,
			Files:    map[string]string{tiny.ToolInputFile: p.Input()},
			Checks:   map[string]string{tiny.ToolAnswerFile: p.Answer()},
			Verifier: Verifier}
		if err := enc.Encode(t); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

package rewards_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/rewards"
)

const spec = `
components:
  - name: correct
    expr: 'num_equal(extract_answer(completion), answer, 1e-6) ? 1.0 : 0.0'
    weight: 1.0
  - name: format
    expr: 'completion.contains("####") ? 1.0 : 0.0'
    weight: 0.2
`

func Example() {
	s, err := rewards.ParseSpec("reward.yaml", []byte(spec))
	if err != nil {
		fmt.Println(err)
		return
	}
	prog, err := rewards.Compile(s)
	if err != nil {
		fmt.Println(err)
		return
	}
	r, _ := prog.Score(context.Background(), rewards.Row{
		Trajectory: tables.Trajectory{Completion: "3 + 4 = 7\n#### 7", Status: tables.StatusOK},
		Prompt:     tables.Prompt{Answer: "7"}, HasPrompt: true,
	}, nil)
	fmt.Println(r.Status, r.Components["correct"], r.Components["format"], r.Total)
	// Output: ok 1 1 1.2
}

func ExampleParseSpec_errors() {
	_, err := rewards.ParseSpec("reward.yaml", []byte("components:\n  - name: a\n    expr: '1.0'\n    weight: high\n"))
	fmt.Println(err)
	s, _ := rewards.ParseSpec("reward.yaml", []byte("components:\n  - name: a\n    expr: 'num_equal(extract(completion), answer) ? 1.0 : 0.0'\n"))
	fmt.Println(rewards.Check(s))
	// Output:
	// reward.yaml:4:13: component "a": weight must be a number, found "high" (write a number such as 1 or 0.2)
	// reward.yaml:3:29: component "a": undeclared reference to 'extract'
}

func ExampleSpec_Digest() {
	a, _ := rewards.ParseSpec("a.yaml", []byte("components: [{name: a, expr: '1.0'}]"))
	b, _ := rewards.ParseSpec("b.yaml", []byte("# the same spec\ncomponents:\n  - name: a\n    expr: \"1.0\"\n    weight: 1\n"))
	fmt.Println(a.Digest() == b.Digest())
	// Output: true
}

func ExampleProgram_ScoreFile() {
	var in bytes.Buffer
	msg := "sampler timed out"
	tables.Write(&in, tables.Trajectories, []tables.Trajectory{
		{PromptID: "p1", SampleIndex: 0, Completion: `so \boxed{12}`, Status: tables.StatusOK},
		{PromptID: "p1", SampleIndex: 1, Completion: "twelve", Status: tables.StatusOK},
		{PromptID: "p1", SampleIndex: 2, Status: tables.StatusTimeout, Error: &msg},
	}, nil)
	prompts, _ := rewards.NewPrompts([]tables.Prompt{{PromptID: "p1", Answer: "12"}})
	s, _ := rewards.ParseSpec("reward.yaml", []byte(`
components:
  - name: correct
    expr: 'num_equal(extract_answer(completion), answer) ? 1.0 : 0.0'
  - name: parsed
    expr: 'parse_number(extract_answer(completion)) >= 0.0'
`))
	prog, _ := rewards.Compile(s)
	var out bytes.Buffer
	sum, err := prog.ScoreFile(context.Background(), &out, bytes.NewReader(in.Bytes()), int64(in.Len()), &rewards.ScoreOptions{Prompts: prompts})
	if err != nil {
		fmt.Println(err)
		return
	}
	rows, _ := tables.Read(bytes.NewReader(out.Bytes()), int64(out.Len()), "rewards", tables.Rewards)
	for _, r := range rows {
		e := ""
		if r.Error != nil {
			e = *r.Error
		}
		fmt.Println(strings.TrimSpace(fmt.Sprintf("%d %-17s %v %v %s", r.SampleIndex, r.Status, r.Components, r.Total, e)))
	}
	fmt.Println(sum.Scored, sum.Errors, sum.Skipped)
	// Output:
	// 0 ok                map[correct:1 parsed:1] 2
	// 1 error             map[] NaN component parsed: parse_number: "" is not a number
	// 2 skipped: timeout  map[] NaN sampler timed out
	// 1 1 1
}

func ExampleExtractAnswer() {
	fmt.Println(rewards.ExtractAnswer(`The sum is \boxed{\frac{1}{2}}.`))
	fmt.Println(rewards.ExtractAnswer("3 + 4 = 7\n#### 7"))
	fmt.Println(rewards.ExtractAnswer("so about 1,250 people"))
	// Output:
	// \frac{1}{2}
	// 7
	// 1,250
}

func ExampleExtractBoxed() {
	fmt.Println(rewards.ExtractBoxed(`\boxed{x^{2}} and later \boxed{42}`))
	// Output: 42
}

func ExampleLastNumber() {
	fmt.Println(rewards.LastNumber("from 3 to -1,234.5 km"))
	// Output: -1,234.5
}

func ExampleParseNumber() {
	for _, s := range []string{"$1,234.50", "12 km", "50%", `\frac{3}{4}`, "3 or 4"} {
		v, ok := rewards.ParseNumber(s)
		fmt.Println(s, v, ok)
	}
	// Output:
	// $1,234.50 1234.5 true
	// 12 km 12 true
	// 50% 50 true
	// \frac{3}{4} 0.75 true
	// 3 or 4 0 false
}

func ExampleNumEqual() {
	fmt.Println(rewards.NumEqual("1,000", "1000.0", 0), rewards.NumEqual("0.333", "1/3", 1e-3), rewards.NumEqual("n/a", "0", 1))
	// Output: true true false
}

func ExampleCount() {
	fmt.Println(rewards.Count("<think>a</think><think>b</think>", "<think>"))
	// Output: 2
}

func ExampleRepetitionRatio() {
	fmt.Printf("%.2f %.2f\n",
		rewards.RepetitionRatio("the cat sat on the mat and the dog sat on the rug", 4),
		rewards.RepetitionRatio("I will check. I will check. I will check. I will check.", 4))
	// Output: 0.00 0.67
}

func ExampleLibrary() {
	// The library in a CEL environment of your own.
	env, err := cel.NewEnv(rewards.Library(), cel.Variable("text", cel.StringType))
	if err != nil {
		fmt.Println(err)
		return
	}
	ast, iss := env.Compile(`[regex_extract(text, "answer: (\\d+)", 1), json_get("{\"a\": [5]}", "a.0"), count(text, "e")]`)
	if iss.Err() != nil {
		fmt.Println(iss.Err())
		return
	}
	prg, _ := env.Program(ast)
	out, _, _ := prg.Eval(map[string]any{"text": "the answer: 42"})
	fmt.Println(out)
	// Output: [42, 5, 2]
}

// A verifier gets the scoring call's Memoizer with each row: a program is
// compiled once and every task call passes its own (the reward task
// passes its *pipeline.TaskContext, so the verdicts are recorded and
// replayed). Score outside a task passes none.
func ExampleWithVerifier() {
	s, err := rewards.ParseSpec("reward.yaml", []byte(`verifiers:
  - name: short
components:
  - name: short
    expr: 'verifiers.short.passed ? 1.0 : 0.0'
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	short := func(ctx context.Context, r rewards.Row, memo rewards.Memoizer) (rewards.VerifierResult, error) {
		check := func(context.Context) (any, error) {
			return rewards.VerifierResult{Passed: len(r.Trajectory.Completion) <= 10, Status: "ok"}, nil
		}
		if memo == nil {
			v, err := check(ctx)
			return v.(rewards.VerifierResult), err
		}
		var out rewards.VerifierResult
		err := memo.Memo(ctx, map[string]string{"short": r.Trajectory.Completion}, &out, check)
		return out, err
	}
	prog, err := rewards.Compile(s, rewards.WithVerifier("short", short))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range []string{"#### 7", "the answer, at some length, is 7"} {
		r, _ := prog.Score(context.Background(), rewards.Row{Trajectory: tables.Trajectory{Completion: c, Status: tables.StatusOK}}, nil)
		fmt.Println(r.Total, r.VerifierOutputs)
	}
	// Output:
	// 1 {"short":{"passed":true,"exit_code":0,"stdout":"","timed_out":false,"status":"ok"}}
	// 0 {"short":{"passed":false,"exit_code":0,"stdout":"","timed_out":false,"status":"ok"}}
}

// Task is the reward stage of a loop: compile the spec once and give the
// program to the task; every call scores its iteration with it.
func ExampleTask() {
	s, err := rewards.ParseSpec("reward.yaml", []byte(spec))
	if err != nil {
		fmt.Println(err)
		return
	}
	prog, err := rewards.Compile(s) // runners.Compile(s) for a spec with verifiers or judges
	if err != nil {
		fmt.Println(err)
		return
	}
	task := rewards.Task(prog) // stages := pipeline.Stages{…, Reward: task, …}
	fmt.Println(task.Name, task.Version == "cel-"+strings.TrimPrefix(s.Digest(), "sha256:"), task.Deterministic)
	for _, o := range task.Outputs {
		fmt.Println(o.Name, o.File)
	}
	// Output:
	// reward true true
	// rewards rewards.parquet
}

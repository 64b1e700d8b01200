package judge_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rlpipe/rlpipe/rewards/judge"
)

// A judge grades a completion against a reference. The fake server stands
// in for OpenAI or a vLLM server.
func Example() {
	api := newFake(says("The completion gives the reference answer.\nScore: 1"))
	defer api.Close()

	j, err := judge.New(judge.Config{
		Name:    "correctness",
		BaseURL: api.URL, // e.g. https://api.openai.com/v1
		Model:   "judge-model",
		Rubric: `Question: {{.Prompt}}
Reference answer: {{.Answer}}
Answer to grade: {{.Completion}}
Does the answer match the reference? Reply with "Score: 1" or "Score: 0".`,
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	// In a task, pass tc (the *pipeline.TaskContext) instead of nil, so the
	// judgment is recorded and replayed.
	res, err := j.Score(context.Background(), judge.Input{Prompt: "2+2?", Completion: "4", Answer: "4"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, res.Score)
	// Output: ok 1
}

// New checks the rubric before any request: a misspelt field is an error
// that names the line, the column and the fields there are.
func ExampleNew() {
	_, err := judge.New(judge.Config{
		Name:    "helpfulness",
		BaseURL: "http://localhost:8000/v1",
		Model:   "judge-model",
		Rubric:  "Rate {{.Response}} from 0 to 1. Score:",
	}, nil)
	fmt.Println(err)
	// Output: invalid judge config: judge "helpfulness": rubric: template: rubric:1:7: executing "rubric" at <.Response>: can't evaluate field Response in type judge.Input; the fields are {{.Prompt}}, {{.Completion}}, {{.Answer}} and {{.Metadata.KEY}}
}

// An answer without a usable score is a Result, not an error: its status
// says what went wrong and Raw shows the answer.
func ExampleJudge_Score() {
	api := newFake(says("Both answers have merit; I cannot choose."))
	defer api.Close()
	j, err := judge.New(judge.Config{
		BaseURL: api.URL, Model: "judge-model",
		Rubric: "Grade {{.Completion}} (task: {{.Metadata.task}}). End with Score: <0..1>.",
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	in := judge.Input{Completion: "x = 3", Metadata: map[string]any{"task": "algebra"}}
	res, err := j.Score(context.Background(), in, nil)
	fmt.Println(res.Status, err)
	fmt.Println(res.Reason)
	fmt.Println(res.Raw)
	// Output:
	// unparseable <nil>
	// no score in the output: make the rubric ask for "Score: <number>"
	// Both answers have merit; I cannot choose.
}

// Usage sums tokens and cost; scores replayed from a memo cost nothing.
func ExampleJudge_Usage() {
	api := newFake(func(int, seenRequest) reply {
		return reply{Content: "Score: 0.5", In: 1200, Out: 300}
	})
	defer api.Close()
	j, err := judge.New(judge.Config{
		BaseURL: api.URL, Model: "judge-model", Rubric: "Grade {{.Completion}}. Score: <0..1>",
		PriceInPerMTok: 0.15, PriceOutPerMTok: 0.6,
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	memo := &memoTable{} // in a task: the *pipeline.TaskContext
	for _, c := range []string{"a", "b", "a"} {
		if _, err := j.Score(context.Background(), judge.Input{Completion: c}, memo); err != nil {
			fmt.Println(err)
			return
		}
	}
	u := j.Usage()
	fmt.Printf("%d scores, %d cached, %d requests, %d+%d tokens, $%.5f, %v\n",
		u.Scores, u.Cached, u.Requests, u.TokensIn, u.TokensOut, u.Cost, u.ByStatus)
	// Output: 3 scores, 1 cached, 2 requests, 2400+600 tokens, $0.00072, map[ok:3]
}

// Key is the judge's part of a memo key: no secret, and nothing that
// cannot change an answer.
func ExampleConfig_Key() {
	cfg := judge.Config{
		Name:        "correctness",
		BaseURL:     "https://api.openai.com/v1",
		Model:       "gpt-4o-mini",
		APIKeyEnv:   "OPENAI_API_KEY",
		Rubric:      "Is {{.Completion}} right? Score: <0 or 1>",
		Concurrency: 16,
	}
	b, _ := json.Marshal(cfg.Key())
	fmt.Println(string(b))
	// Output: {"format":1,"base_url":"https://api.openai.com/v1","model":"gpt-4o-mini","rubric":"Is {{.Completion}} right? Score: \u003c0 or 1\u003e","min":0,"max":1,"temperature":0}
}

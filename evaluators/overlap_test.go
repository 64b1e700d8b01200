package evaluators

import (
	"errors"
	"fmt"
	"iter"
	"reflect"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

func prompts(ps ...tables.Prompt) iter.Seq2[tables.Prompt, error] {
	return func(yield func(tables.Prompt, error) bool) {
		for _, p := range ps {
			if !yield(p, nil) {
				return
			}
		}
	}
}

func p(id, text string) tables.Prompt { return tables.Prompt{PromptID: id, Prompt: text} }

// TestCompareSets: an eval row is shared when a training prompt has its
// id or its text (whitespace normalized); the examples name both ids.
func TestCompareSets(t *testing.T) {
	chat := func(id, content string) tables.Prompt {
		return tables.Prompt{PromptID: id, Messages: []tables.Message{{Role: "system", Content: "Answer."}, {Role: "user", Content: content}}}
	}
	train := []tables.Prompt{
		p("gsm8k-0001", "Natalia sold clips to 48 of her friends.\nHow many clips did she sell?"),
		p("gsm8k-0002", "Weng earns $12 an hour."),
		p("gsm8k-0003", "Betty is saving money."),
		p("untitled", ""),
		chat("chat-1", "What is 2+2?"),
	}
	for _, c := range []struct {
		name string
		eval []tables.Prompt
		want Overlap
	}{
		{"the same text under other ids, whitespace aside", []tables.Prompt{
			p("hf-7", "  Natalia sold clips to 48 of her friends. How many\tclips did she sell?\n"),
			p("hf-8", "Julie is reading a book."),
			p("hf-9", "Weng  earns $12 an hour."),
		}, Overlap{EvalRows: 3, Shared: 2, Examples: []SharedPrompt{
			{EvalID: "hf-7", TrainID: "gsm8k-0001", SameText: true},
			{EvalID: "hf-9", TrainID: "gsm8k-0002", SameText: true},
		}}},
		{"differing texts", []tables.Prompt{
			p("hf-1", "Natalia sold clips to 48 of her friends. How many clips did she buy?"),
			p("hf-2", "Weng earns $13 an hour."),
		}, Overlap{EvalRows: 2}},
		{"the same id, with and without the text", []tables.Prompt{
			p("gsm8k-0001", "Natalia sold clips to 48 of her friends. How many clips did she sell?"),
			p("gsm8k-0003", "Another question."),
		}, Overlap{EvalRows: 2, Shared: 2, SameID: 2, Examples: []SharedPrompt{
			{EvalID: "gsm8k-0001", TrainID: "gsm8k-0001", SameText: true},
			{EvalID: "gsm8k-0003", TrainID: "gsm8k-0003"},
		}}},
		{"chat prompts by their messages", []tables.Prompt{chat("c-9", " What is\n2+2? ")},
			Overlap{EvalRows: 1, Shared: 1, Examples: []SharedPrompt{{EvalID: "c-9", TrainID: "chat-1", SameText: true}}}},
		{"a prompt without text matches no other", []tables.Prompt{p("blank", " \n")}, Overlap{EvalRows: 1}},
		{"every shared row counts, three are named", []tables.Prompt{
			p("a", "Betty is saving money."), p("b", "Betty is saving money."), p("c", "Betty is saving money."),
			p("d", "Betty is saving money."), p("gsm8k-0002", "x"),
		}, Overlap{EvalRows: 5, Shared: 5, SameID: 1, Examples: []SharedPrompt{
			{EvalID: "a", TrainID: "gsm8k-0003", SameText: true},
			{EvalID: "b", TrainID: "gsm8k-0003", SameText: true},
			{EvalID: "c", TrainID: "gsm8k-0003", SameText: true},
		}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := CompareSets(prompts(train...), prompts(c.eval...))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}

	t.Run("a read error", func(t *testing.T) {
		bad := errors.New("corrupt page")
		failing := func(yield func(tables.Prompt, error) bool) { yield(tables.Prompt{}, bad) }
		if _, err := CompareSets(failing, prompts()); !errors.Is(err, bad) {
			t.Errorf("train: %v", err)
		}
		if _, err := CompareSets(prompts(train...), failing); !errors.Is(err, bad) {
			t.Errorf("eval: %v", err)
		}
	})
}

func TestPromptText(t *testing.T) {
	for _, c := range []struct {
		name string
		p    tables.Prompt
		want string
	}{
		{"trimmed and collapsed", p("a", "\t What is\n\n 2 +  2? \r\n"), "What is 2 + 2?"},
		{"chat", tables.Prompt{Messages: []tables.Message{{Role: "user", Content: " Hi\nthere "}}}, "user: Hi there"},
		{"prompt over messages", tables.Prompt{Prompt: "Q", Messages: []tables.Message{{Role: "user", Content: "M"}}}, "Q"},
		{"nothing", p("a", " \n "), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := PromptText(c.p); got != c.want {
				t.Errorf("PromptText = %q, want %q", got, c.want)
			}
		})
	}
}

func ExampleCompareSets() {
	train := prompts(p("gsm8k-0001", "Natalia sold clips to 48 of her friends.\nHow many?"), p("gsm8k-0002", "Weng earns $12 an hour."))
	eval := prompts(p("hf-17", "Natalia sold clips to 48 of her friends. How many?"), p("hf-18", "Julie reads a book."))
	ov, err := CompareSets(train, eval)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d of %d shared, %d by id\n", ov.Shared, ov.EvalRows, ov.SameID)
	for _, ex := range ov.Examples {
		fmt.Printf("eval %s = train %s (same text: %v)\n", ex.EvalID, ex.TrainID, ex.SameText)
	}
	// Output:
	// 1 of 2 shared, 0 by id
	// eval hf-17 = train gsm8k-0001 (same text: true)
}

// Rows with one instruction whose problem is in their metadata (agent
// tasks with their own files) are different problems; the same
// instruction and metadata under another id is the same one.
func TestCompareSetsMetadata(t *testing.T) {
	task := func(id, input string) tables.Prompt {
		return tables.Prompt{PromptID: id, Prompt: "Sum input.txt into answer.txt.", Metadata: `{"files":{"input.txt":"` + input + `"}}`}
	}
	got, err := CompareSets(prompts(task("sum-7-5", "7 5"), task("sum-2-3", "2 3")), prompts(task("sum-0-1", "0 1"), task("again-2-3", "2 3")))
	want := Overlap{EvalRows: 2, Shared: 1, Examples: []SharedPrompt{{EvalID: "again-2-3", TrainID: "sum-2-3", SameText: true}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v\nwant %+v", got, err, want)
	}
}

// Incidental metadata (a reasoning, a level) does not make the same
// question another problem; task keys in another order or spacing are
// the same task.
func TestCompareSetsIncidentalMetadata(t *testing.T) {
	q := func(id, meta string) tables.Prompt {
		return tables.Prompt{PromptID: id, Prompt: "Weng earns $12 an hour.", Metadata: meta}
	}
	got, err := CompareSets(prompts(q("gsm8k-1", `{"reasoning": "12*50/60"}`), q("t-1", `{"verifier": "true", "files": {"a": "1"}}`)),
		prompts(q("math-1", `{"level": 3}`), q("math-2", `not json`), q("t-2", `{"files":{"a":"1"},"verifier":"true","level":2}`)))
	want := Overlap{EvalRows: 3, Shared: 3, Examples: []SharedPrompt{
		{EvalID: "math-1", TrainID: "gsm8k-1", SameText: true},
		{EvalID: "math-2", TrainID: "gsm8k-1", SameText: true},
		{EvalID: "t-2", TrainID: "t-1", SameText: true},
	}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v\nwant %+v", got, err, want)
	}
}

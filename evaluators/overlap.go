package evaluators

import (
	"crypto/sha256"
	"encoding/json"
	"iter"
	"slices"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// OverlapColumns are the prompts table's columns CompareSets reads: a
// reader may restrict itself to them (tables.ReadOptions.Columns).
var OverlapColumns = []string{"prompt_id", "prompt", "messages", "metadata"}

// MaxOverlapExamples is how many shared rows an Overlap names.
const MaxOverlapExamples = 3

// Overlap is what an eval set shares with the training prompts: rows
// that a training prompt has by prompt_id, or by prompt text. The text
// catches the same questions imported twice under different ids (a JSONL
// file and a Hugging Face save_to_disk folder give different id
// prefixes), which ids alone miss.
type Overlap struct {
	// EvalRows is the number of rows of the eval set.
	EvalRows int
	// Shared counts the eval rows a training prompt has, by id or text;
	// SameID those of them whose prompt_id is a training prompt's.
	Shared, SameID int
	// Examples are the first shared rows (at most MaxOverlapExamples),
	// in the eval set's order.
	Examples []SharedPrompt
}

// SharedPrompt is an eval row and the training prompt it repeats.
type SharedPrompt struct {
	EvalID, TrainID string
	// SameText: the two share the prompt text (with whitespace
	// normalized) and task keys (TaskKeys); otherwise only the id.
	SameText bool
}

// CompareSets finds what the eval prompts share with the training
// prompts, by prompt_id and by a hash of the prompt text (PromptText)
// with the row's task keys (TaskKeys): agent tasks that share one
// instruction, each with its own files and checks, are different
// problems, while the same question imported twice with other incidental
// metadata (a reasoning, a level) is still one. It holds a hash and an id
// per training row, never the texts, and reads each set once.
func CompareSets(train, eval iter.Seq2[tables.Prompt, error]) (Overlap, error) {
	type hash = [sha256.Size]byte
	hashOf := func(p tables.Prompt) (hash, bool) {
		t := PromptText(p)
		return sha256.Sum256([]byte(t + "\x00" + TaskKeys(p))), t != ""
	}
	ids := map[string]hash{}   // training id → its text's hash (zero: no text)
	texts := map[hash]string{} // text hash → the first training id with it
	for p, err := range train {
		if err != nil {
			return Overlap{}, err
		}
		h, ok := hashOf(p)
		if !ok {
			ids[p.PromptID] = hash{}
			continue
		}
		ids[p.PromptID] = h
		if _, seen := texts[h]; !seen {
			texts[h] = p.PromptID
		}
	}
	var o Overlap
	for p, err := range eval {
		if err != nil {
			return Overlap{}, err
		}
		o.EvalRows++
		h, hasText := hashOf(p)
		var ex SharedPrompt
		if th, ok := ids[p.PromptID]; ok {
			o.SameID++
			ex = SharedPrompt{EvalID: p.PromptID, TrainID: p.PromptID, SameText: hasText && th == h}
		} else if id, ok := texts[h]; ok && hasText {
			ex = SharedPrompt{EvalID: p.PromptID, TrainID: id, SameText: true}
		} else {
			continue
		}
		o.Shared++
		if len(o.Examples) < MaxOverlapExamples {
			o.Examples = append(o.Examples, ex)
		}
	}
	return o, nil
}

// taskKeys are the metadata keys that make a row's problem beyond its
// text: an agent task's (environments/agent's PromptTask).
var taskKeys = []string{"checks", "files", "protected", "run", "verifier"}

// TaskKeys is the part of a row's metadata CompareSets compares besides
// its text: its task keys (files, checks, verifier, run, protected) as
// canonical JSON (keys sorted, no spaces), or "" when it has none or its
// metadata is not a JSON object.
func TaskKeys(p tables.Prompt) string {
	// Decode only metadata that names a task key: a dataset's (a GSM8K
	// reasoning, a level) has none, and every training row passes here.
	if !slices.ContainsFunc(taskKeys, func(k string) bool { return strings.Contains(p.Metadata, `"`+k+`"`) }) {
		return ""
	}
	var m map[string]any
	if json.Unmarshal([]byte(p.Metadata), &m) != nil {
		return ""
	}
	task := map[string]any{}
	for _, k := range taskKeys {
		if v, ok := m[k]; ok {
			task[k] = v
		}
	}
	if len(task) == 0 {
		return ""
	}
	// Decoded JSON values always encode; map keys are sorted.
	b, err := json.Marshal(task)
	if err != nil {
		return ""
	}
	return string(b)
}

// PromptText is the text a prompt's overlap is judged by: its prompt,
// or for a chat prompt its messages (role and content, one per line),
// trimmed and with every run of whitespace made one space, so that the
// same question with other line breaks or indentation matches. It is ""
// for a prompt without text.
func PromptText(p tables.Prompt) string {
	text := p.Prompt
	if strings.TrimSpace(text) == "" && len(p.Messages) > 0 {
		var b strings.Builder
		for _, m := range p.Messages {
			b.WriteString(m.Role)
			b.WriteString(": ")
			b.WriteString(m.Content)
			b.WriteByte('\n')
		}
		text = b.String()
	}
	return strings.Join(strings.Fields(text), " ")
}

package rewards

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/internal/yamlcore"
)

// RowColumns are the keys of Row.Columns, sorted: the dataset columns a
// reward's code sees of a row.
var RowColumns = []string{"answer", "finish_reason", "metadata", "num_tokens", "prompt_id", "sample_index", "source", "split", "status"}

// Columns returns the row's dataset columns, one value each, as every
// part of a spec that reads whole rows sees them: a Python function's
// **columns (rewards/runners), a verifier template's .Row (as JSON) and
// the CEL variable row. They are the prompt's answer, metadata, source
// and split, and the trajectory's prompt_id, sample_index, finish_reason,
// num_tokens and status (RowColumns). Metadata is parsed from its JSON
// text: a JSON object is a map[string]any (numbers float64), and any
// other text ("null" too), not JSON or not an object, is an empty map. A row without its prompt has the prompt's columns empty.
func (r *Row) Columns() map[string]any {
	return columnsOf(&r.Trajectory, &r.Prompt, parseMetadata(r.Prompt.Metadata))
}

// columnsOf is Row.Columns with the metadata already parsed.
func columnsOf(t *tables.Trajectory, p *tables.Prompt, metadata map[string]any) map[string]any {
	return map[string]any{
		"answer": p.Answer, "metadata": metadata, "prompt_id": t.PromptID, "sample_index": t.SampleIndex,
		"source": p.Source, "split": p.Split, "finish_reason": t.FinishReason,
		"num_tokens": t.NumTokens, "status": t.Status,
	}
}

// parseMetadata is a prompt's metadata as Columns gives it.
func parseMetadata(text string) map[string]any {
	m := map[string]any{}
	if text != "" {
		_ = json.Unmarshal([]byte(text), &m) // not an object: {}
	}
	if m == nil { // the text null
		return map[string]any{}
	}
	return m
}

// rowValue is the CEL variable row of the trajectory t (with only the
// columns Columns reads set) and its prompt e.
func rowValue(t *tables.Trajectory, e *promptEntry) ref.Val {
	if e == nil {
		return missingPrompt(t.PromptID)
	}
	return types.NewStringInterfaceMap(types.DefaultTypeAdapter, columnsOf(t, &e.p, e.metadataMap()))
}

// metadataMap is the prompt's metadata as Columns parses it, parsed once
// and shared, read-only, by the prompt's samples.
func (e *promptEntry) metadataMap() map[string]any {
	e.rowMetaOnce.Do(func() { e.rowMeta = parseMetadata(e.p.Metadata) })
	return e.rowMeta
}

// rowColumnError is the error of row.NAME (or row["NAME"]) when NAME is
// not one of RowColumns.
func rowColumnError(spec *Spec, comp, expr string, at Pos, native *celast.AST, id int64, name string) error {
	loc := native.SourceInfo().GetStartLocation(id)
	line, col := mapPos(at, expr, loc.Line(), loc.Column())
	hint := "a key of the metadata is row.metadata." + name
	if s := yamlcore.Suggest(name, RowColumns); strings.HasPrefix(s, "did you mean") {
		hint = s
	}
	return &SpecError{File: spec.Name, Line: line, Column: col, Component: comp,
		Msg: fmt.Sprintf("row.%s is not a column of the row; its columns are %s", name, strings.Join(RowColumns, ", ")), Hint: hint}
}

// missingKey adds to the message of a failed expression, when it is a key
// missing from a map and the program reads row, which row it was and the
// keys its metadata has: the key is most often a metadata key that this
// row lacks. (A spec that does not read row keeps the messages, and the
// rewards files, it had.)
func (p *Program) missingKey(a *activation, msg string) string {
	if !strings.HasPrefix(msg, "no such key") || !p.uses.has(vRow) {
		return msg
	}
	id, _ := a.src.value(vPromptID, a.row).(types.String)
	sample, _ := a.src.value(vSampleIndex, a.row).(types.Int)
	keys := "no metadata"
	if m, ok := a.src.value(vMetadata, a.row).(interface{ Value() any }); ok {
		if mm, ok := m.Value().(map[string]any); ok && len(mm) > 0 {
			keys = "metadata keys " + strings.Join(slices.Sorted(maps.Keys(mm)), ", ")
		}
	}
	return fmt.Sprintf("%s (row of prompt %q, sample %d: %s)", msg, string(id), int64(sample), keys)
}

// rowVar is the variable row of the batch's row i.
func (s *batchSource) rowVar(i int) ref.Val {
	t := tables.Trajectory{PromptID: s.promptID.Value(i), SampleIndex: s.sampleIndex[i], Status: s.status.Value(i)}
	if a := s.str[vFinishReason]; a != nil {
		t.FinishReason = a.Value(i)
	}
	if a := s.i32[vNumTokens]; a != nil {
		t.NumTokens = a[i]
	}
	return rowValue(&t, s.lookup(t.PromptID))
}

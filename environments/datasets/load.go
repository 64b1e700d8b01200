package datasets

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Answer formats.
const (
	// AnswerRaw keeps the answer column as it is, trimmed of spaces.
	AnswerRaw = ""
	// AnswerGSM8K reads GSM8K's "reasoning … #### 1,234": the answer is the
	// number after the last "####" without commas, and the reasoning goes
	// to the metadata under "reasoning".
	AnswerGSM8K = "gsm8k"
)

// Split names.
const (
	SplitTrain = "train"
	SplitTest  = "test"
)

// Fields maps the file's columns to a prompt's fields. Empty fields mean
// the defaults: no id column (ids are content hashes), "question", "answer".
type Fields struct {
	ID       string `json:"id,omitempty"`
	Question string `json:"question,omitempty"`
	Answer   string `json:"answer,omitempty"`
	// Messages names a column holding the prompt as chat messages (a list
	// of {role, content}, as chat datasets ship them). With Messages and
	// no Question, no question column is read: the prompt is the messages.
	Messages string `json:"messages,omitempty"`
	// NoAnswer reads no answer column: the rows are tasks that an
	// environment or a verifier judges (an agent's tasks), their answer
	// empty. Answer must then be empty.
	NoAnswer bool `json:"no_answer,omitempty"`
}

// Common column names, for Fields.
var (
	// DefaultFields reads question and answer.
	DefaultFields = Fields{Question: "question", Answer: "answer"}
	// ProblemSolution reads problem and solution (MATH).
	ProblemSolution = Fields{Question: "problem", Answer: "solution"}
	// PromptAnswer reads prompt and answer.
	PromptAnswer = Fields{Question: "prompt", Answer: "answer"}
)

// Options tune loading. A nil *Options means the defaults.
type Options struct {
	// Fields names the columns read; empty names mean DefaultFields'.
	Fields Fields `json:"fields"`
	// AnswerFormat is AnswerRaw or AnswerGSM8K.
	AnswerFormat string `json:"answer_format,omitempty"`
	// Split is every row's split; "" means SplitTrain.
	Split string `json:"split,omitempty"`
	// Source is every row's source; "" means the file's base name without
	// its extension.
	Source string `json:"source,omitempty"`
	// IDPrefix prefixes content-hash ids; "" means Source followed by "-".
	IDPrefix string `json:"id_prefix,omitempty"`
}

func (o *Options) withDefaults(name string) (Options, error) {
	var v Options
	if o != nil {
		v = *o
	}
	if v.Fields.Question == "" && v.Fields.Messages == "" {
		v.Fields.Question = DefaultFields.Question
	}
	switch {
	case v.Fields.NoAnswer && v.Fields.Answer != "":
		return v, fmt.Errorf("load %s: an answer column (%q) and no answer at once: %w", name, v.Fields.Answer, ErrInvalid)
	case v.Fields.NoAnswer && v.AnswerFormat != AnswerRaw:
		return v, fmt.Errorf("load %s: answer format %q without an answer column: %w", name, v.AnswerFormat, ErrInvalid)
	case v.Fields.Answer == "" && !v.Fields.NoAnswer:
		v.Fields.Answer = DefaultFields.Answer
	}
	if v.Split == "" {
		v.Split = SplitTrain
	}
	if v.Source == "" {
		base := filepath.Base(name)
		v.Source = strings.TrimSuffix(base, filepath.Ext(base))
	}
	if v.IDPrefix == "" {
		v.IDPrefix = v.Source + "-"
	}
	if v.AnswerFormat != AnswerRaw && v.AnswerFormat != AnswerGSM8K {
		return v, fmt.Errorf("load %s: unknown answer format %q (want %q or %q): %w",
			name, v.AnswerFormat, AnswerRaw, AnswerGSM8K, ErrInvalid)
	}
	f := v.Fields
	if (f.Answer != "" && slices.ContainsFunc([]string{f.ID, f.Question, f.Messages}, func(c string) bool { return c == f.Answer })) ||
		(f.ID != "" && (f.ID == f.Question || f.ID == f.Messages)) || (f.Question != "" && f.Question == f.Messages) {
		return v, fmt.Errorf("load %s: fields %+v name one column twice: %w", name, f, ErrInvalid)
	}
	return v, nil
}

// ErrInvalid wraps artifacts.ErrInvalid: the file or the options are wrong.
// Row errors are *RowError and match it too.
var ErrInvalid = fmt.Errorf("invalid dataset: %w", artifacts.ErrInvalid)

// RowError names the file, line or row and column of a value that does
// not fit. It matches ErrInvalid with errors.Is.
type RowError struct {
	File string
	// Line is the JSONL line, from 1; 0 for Parquet.
	Line int64
	// Row is the Parquet row, from 0; -1 for JSONL.
	Row    int64
	Column string // "" when the row as a whole is wrong
	Reason string
}

func (e *RowError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "load %s ", e.File)
	if e.Row >= 0 {
		fmt.Fprintf(&b, "row %d", e.Row)
	} else {
		fmt.Fprintf(&b, "line %d", e.Line)
	}
	if e.Column != "" {
		fmt.Fprintf(&b, " column %q", e.Column)
	}
	return b.String() + ": " + e.Reason
}

func (e *RowError) Unwrap() error { return ErrInvalid }

// Load reads the dataset file at path: JSONL (.jsonl, .json lines) or
// Parquet (.parquet), by extension.
func Load(path string, opts *Options) ([]tables.Prompt, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	defer f.Close()
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson", ".json":
		return ReadJSONL(f, path, opts)
	case ".parquet", ".pq":
		fi, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", path, err)
		}
		return ReadParquet(f, fi.Size(), path, opts)
	}
	return nil, fmt.Errorf("load %s: unknown extension (want .jsonl or .parquet): %w", path, ErrInvalid)
}

// ReadJSONL reads a JSON Lines dataset: one JSON object per line, blank
// lines skipped. name identifies the input in errors.
func ReadJSONL(r io.Reader, name string, opts *Options) ([]tables.Prompt, error) {
	o, err := opts.withDefaults(name)
	if err != nil {
		return nil, err
	}
	c := newConverter(name, o)
	br := bufio.NewReaderSize(r, 1<<20)
	for line := int64(1); ; line++ {
		b, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 {
			row, perr := parseLine(b)
			if perr != nil {
				return nil, &RowError{File: name, Line: line, Row: -1, Reason: perr.Error()}
			}
			if err := c.add(row, pos{line: line, row: -1}); err != nil {
				return nil, err
			}
		}
		if errors.Is(err, io.EOF) {
			return c.rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("load %s line %d: %w", name, line, err)
		}
	}
}

func parseLine(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, fmt.Errorf("not a JSON object: %s", shorten(string(bytes.TrimSpace(b))))
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value on the line")
	}
	return m, nil
}

// ReadParquet reads a Parquet dataset of size bytes. name identifies the
// input in errors.
func ReadParquet(r io.ReaderAt, size int64, name string, opts *Options) ([]tables.Prompt, error) {
	o, err := opts.withDefaults(name)
	if err != nil {
		return nil, err
	}
	f, err := tables.OpenFile(r, size, name, nil)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	defer f.Close()
	if err := o.Fields.check(name, f.Schema()); err != nil {
		return nil, err
	}
	c := newConverter(name, o)
	var row int64
	for m, err := range f.Rows(context.Background()) {
		if err != nil {
			return nil, fmt.Errorf("load %s row %d: %w", name, row, err)
		}
		if err := c.add(m, pos{row: row}); err != nil {
			return nil, err
		}
		row++
	}
	return c.rows, nil
}

// check reports the first mapped column that schema lacks, naming the
// columns it has.
func (f Fields) check(name string, schema *arrow.Schema) error {
	for _, col := range []string{f.ID, f.Question, f.Answer, f.Messages} {
		if col != "" && len(schema.FieldIndices(col)) == 0 {
			var names []string
			for _, fl := range schema.Fields() {
				names = append(names, fl.Name)
			}
			return fmt.Errorf("load %s: no column %q (columns: %s); map another with --question, --answer, --messages or --id: %w",
				name, col, strings.Join(names, ", "), ErrInvalid)
		}
	}
	return nil
}

// pos is where a row is: a JSONL line (row -1) or a Parquet row.
type pos struct{ line, row int64 }

func (p pos) String() string {
	if p.row >= 0 {
		return fmt.Sprintf("row %d", p.row)
	}
	return fmt.Sprintf("line %d", p.line)
}

type converter struct {
	name string
	o    Options
	rows []tables.Prompt
	seen map[string]pos
}

func newConverter(name string, o Options) *converter {
	return &converter{name: name, o: o, seen: map[string]pos{}}
}

func (c *converter) fail(p pos, col, format string, args ...any) error {
	return &RowError{File: c.name, Line: p.line, Row: p.row, Column: col, Reason: fmt.Sprintf(format, args...)}
}

func (c *converter) add(m map[string]any, p pos) error {
	f := c.o.Fields
	var q string
	var err error
	if f.Question != "" {
		if q, err = c.text(m, f.Question, p, false); err != nil {
			return err
		}
	}
	var msgs []tables.Message
	if f.Messages != "" {
		if msgs, err = c.messages(m, f.Messages, p); err != nil {
			return err
		}
	}
	var rawAnswer string
	if !f.NoAnswer {
		if rawAnswer, err = c.text(m, f.Answer, p, true); err != nil {
			return err
		}
	}
	meta := map[string]any{}
	for k, v := range m {
		if k != f.ID && k != f.Question && k != f.Answer && k != f.Messages {
			meta[k] = v
		}
	}
	answer := strings.TrimSpace(rawAnswer)
	if c.o.AnswerFormat == AnswerGSM8K {
		final, reasoning, err := ParseGSM8K(rawAnswer)
		if err != nil {
			return c.fail(p, f.Answer, "%v", err)
		}
		answer = final
		meta["reasoning"] = reasoning
	}
	var id string
	if f.ID != "" {
		if id, err = c.text(m, f.ID, p, true); err != nil {
			return err
		}
	} else {
		h := sha256.New()
		h.Write([]byte(q))
		if msgs != nil { // the chat form counts too, after the question
			b, err := json.Marshal(msgs)
			if err != nil {
				return c.fail(p, f.Messages, "the messages cannot be hashed into an id: %v", err)
			}
			h.Write([]byte{0})
			h.Write(b)
		}
		h.Write([]byte{0})
		h.Write([]byte(rawAnswer))
		id = c.o.IDPrefix + hex.EncodeToString(h.Sum(nil))[:16]
	}
	if first, dup := c.seen[id]; dup {
		col := f.ID
		if col == "" {
			col = cmp.Or(f.Question, f.Messages)
			return c.fail(p, col, "same question and answer as %s (id %s)", first, id)
		}
		return c.fail(p, col, "id %q already used at %s", id, first)
	}
	c.seen[id] = p
	b, err := json.Marshal(meta)
	if err != nil {
		return c.fail(p, "", "metadata: %v", err)
	}
	c.rows = append(c.rows, tables.Prompt{PromptID: id, Prompt: q, Messages: msgs, Answer: answer,
		Metadata: string(b), Source: c.o.Source, Split: c.o.Split})
	return nil
}

// messages returns column col of row m as chat messages: a non-empty
// list of objects with a string role and content (other keys are left
// out).
func (c *converter) messages(m map[string]any, col string, p pos) ([]tables.Message, error) {
	v, ok := m[col]
	if !ok {
		return nil, c.fail(p, col, "missing (the row has %s)", keys(m))
	}
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, c.fail(p, col, "want a non-empty list of {role, content} messages, found %s", shorten(fmt.Sprint(v)))
	}
	out := make([]tables.Message, len(list))
	for i, e := range list {
		obj, _ := e.(map[string]any)
		role, _ := obj["role"].(string)
		content, isText := obj["content"].(string)
		if role == "" || !isText {
			return nil, c.fail(p, col, "message %d: want {role, content} with text values, found %s", i, shorten(fmt.Sprint(e)))
		}
		out[i] = tables.Message{Role: role, Content: content}
	}
	return out, nil
}

// text returns column col of row m as text: a string, or a number when
// numbers are allowed.
func (c *converter) text(m map[string]any, col string, p pos, numbers bool) (string, error) {
	v, ok := m[col]
	if !ok {
		hint := ""
		if col == c.o.Fields.Answer {
			hint = "; name the answer column with --answer, or read none with --no-answer"
		}
		return "", c.fail(p, col, "missing (the row has %s)%s", keys(m), hint)
	}
	var s string
	switch v := v.(type) {
	case nil:
		return "", c.fail(p, col, "null")
	case string:
		s = v
	case json.Number:
		if !numbers {
			return "", c.fail(p, col, "want a string, found the number %s", v)
		}
		s = v.String()
	case int64:
		if !numbers {
			return "", c.fail(p, col, "want a string, found the number %d", v)
		}
		s = strconv.FormatInt(v, 10)
	case float64, float32:
		f := toFloat(v)
		if !numbers || math.IsNaN(f) || math.IsInf(f, 0) {
			return "", c.fail(p, col, "want a string, found the number %v", v)
		}
		s = strconv.FormatFloat(f, 'g', -1, 64)
	default:
		return "", c.fail(p, col, "want a string, found %s", shorten(fmt.Sprint(v)))
	}
	if strings.TrimSpace(s) == "" {
		return "", c.fail(p, col, "empty")
	}
	return s, nil
}

func toFloat(v any) float64 {
	if f, ok := v.(float32); ok {
		return float64(f)
	}
	return v.(float64)
}

func keys(m map[string]any) string {
	if len(m) == 0 {
		return "no columns"
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, strconv.Quote(k))
	}
	slices.Sort(ks)
	return strings.Join(ks, ", ")
}

func shorten(s string) string {
	const n = 60
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ParseGSM8K splits a GSM8K answer, "reasoning … #### 1,234", into the
// final answer after the last "####" with commas and spaces removed
// ("1234") and the reasoning before it, trimmed. The final answer must be
// a number.
func ParseGSM8K(answer string) (final, reasoning string, err error) {
	i := strings.LastIndex(answer, "####")
	if i < 0 {
		return "", "", errors.New(`no "#### <number>" final answer`)
	}
	reasoning = strings.TrimSpace(answer[:i])
	final = strings.Map(func(r rune) rune {
		if r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, answer[i+4:])
	if !isDecimal(final) {
		return "", "", fmt.Errorf("final answer %q after \"####\" is not a number", shorten(strings.TrimSpace(answer[i+4:])))
	}
	return final, reasoning, nil
}

// isDecimal reports whether s is an optionally signed decimal number:
// digits, with at most one '.' between digits.
func isDecimal(s string) bool {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	whole, frac, dot := strings.Cut(s, ".")
	digits := func(t string) bool {
		return t != "" && strings.Trim(t, "0123456789") == ""
	}
	return digits(whole) && (!dot || digits(frac))
}

package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// printer writes a command's result: JSON for scripts (-o json), aligned
// text for people.
type printer struct {
	w    io.Writer
	json bool
}

// JSON writes v as indented JSON followed by a newline. The shapes are part
// of the command-line contract: fields are only ever added.
func (p printer) JSON(v any) error {
	enc := json.NewEncoder(p.w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		var bad *json.UnsupportedValueError
		if errors.As(err, &bad) {
			// JSON has no NaN or infinity: a figure that is not a number
			// must reach the output as null; one that did not is a bug.
			return fmt.Errorf("print the JSON output: %w (rlpipe should write a value that is not a number as null: please report this)", err)
		}
		return fmt.Errorf("print the JSON output: %w", err)
	}
	return nil
}

// Result prints a command's one result: v as JSON with -o json, else
// the line format and a describe.
func (p printer) Result(v any, format string, a ...any) error {
	if p.json {
		return p.JSON(v)
	}
	return p.Printf(format, a...)
}

// Printf writes text.
func (p printer) Printf(format string, a ...any) error {
	_, err := fmt.Fprintf(p.w, format, a...)
	return err
}

// table is aligned text output: columns padded to their widest cell, some
// right-aligned (numbers), the last column never padded.
type table struct {
	header []string
	right  []bool // right-align column i
	rows   [][]string
}

func newTable(header ...string) *table {
	return &table{header: header, right: make([]bool, len(header))}
}

// alignRight right-aligns the given columns.
func (t *table) alignRight(cols ...int) *table {
	for _, c := range cols {
		for len(t.right) <= c {
			t.right = append(t.right, false)
		}
		t.right[c] = true
	}
	return t
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// write renders the table; a nil header prints only rows.
func (t *table) write(w io.Writer) error { return t.writeWidths(w, t.widths()) }

// all is the header (if any) and the rows.
func (t *table) all() [][]string {
	if t.header == nil {
		return t.rows
	}
	return append([][]string{t.header}, t.rows...)
}

// widths is the width of each column: its widest cell.
func (t *table) widths() []int {
	n := len(t.header)
	for _, r := range t.rows {
		n = max(n, len(r))
	}
	width := make([]int, n)
	for _, r := range t.all() {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	return width
}

// writeWidths renders the table with the given column widths; a cell
// wider than its column is written whole.
func (t *table) writeWidths(w io.Writer, width []int) error {
	all := t.all()
	var b strings.Builder
	for _, r := range all {
		var line strings.Builder
		for i, c := range r {
			pad := ""
			if i < len(width) {
				pad = strings.Repeat(" ", max(0, width[i]-utf8.RuneCountInString(c)))
			}
			last := i == len(r)-1
			switch {
			case i < len(t.right) && t.right[i]:
				line.WriteString(pad + c)
			case last:
				line.WriteString(c)
			default:
				line.WriteString(c + pad)
			}
			if !last {
				line.WriteString("  ")
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// shortIDLen is how much of a commit id text output shows; any unique
// prefix names the commit.
const shortIDLen = 12

func shortID(id string) string {
	if len(id) > shortIDLen {
		return id[:shortIDLen]
	}
	return id
}

// formatTime prints a time for people, in UTC so that output does not
// depend on the machine's zone.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// humanBytes prints a size the way people read it: 512 B, 1.5 KiB, 3.0 MiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// plural writes "1 change" or "3 changes".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

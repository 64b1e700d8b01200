package tables

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// What Import refuses beyond a value's type: text that is not UTF-8 (a
// JSON decoder would store each bad byte as U+FFFD; a CSV cell would
// reach the Parquet file as is and make it unreadable), and a repeated
// value in a column the table declares unique (Column.Unique).

// utf8Hint is the next step for a file that is not UTF-8.
const utf8Hint = "convert the file to UTF-8 first (for Latin-1 text: iconv -f latin1 -t utf-8 FILE > FILE.utf8)"

// badUTF8 is the index of the first byte of s that is not UTF-8, or -1.
func badUTF8(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return i
			}
		}
	}
	return -1
}

// notUTF8 is the error for text of column, at line, whose byte bad at
// col (1 based, in the line) is not UTF-8; text is the column's value as
// written.
func notUTF8(name string, line int64, column, text string, bad byte, col int) error {
	return &ValueError{Input: name, Line: line, Column: column, Want: "UTF-8 text", Value: shorten(csvCell(text)),
		Reason: fmt.Sprintf("byte 0x%02x at byte %d of the line is not UTF-8; %s", bad, col, utf8Hint)}
}

// jsonlNotUTF8 is the error for a JSONL line (raw, as read, with its
// leading space) that is not UTF-8: it names the key whose key or value
// holds the first bad byte.
func jsonlNotUTF8(name string, line int64, raw []byte) error {
	off := badUTF8(string(raw))
	lead := len(raw) - len(bytes.TrimLeft(raw, " \t\r\n"))
	b := raw[lead:]
	dec := json.NewDecoder(bytes.NewReader(b))
	key, value := "", string(b)
	if _, err := dec.Token(); err == nil {
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				break
			}
			if lead+int(dec.InputOffset()) > off {
				key, _ = tok.(string)
				// As written: decoding would turn the bad byte into U+FFFD.
				value = string(bytes.TrimSpace(v))
				if len(value) >= 2 && value[0] == '"' {
					value = value[1 : len(value)-1]
				}
				break
			}
		}
	}
	return notUTF8(name, line, key, value, raw[off], off+1)
}

// uniques tracks the values of a table's unique columns during an
// import: for each, the line each value was first seen at.
type uniques map[string]map[string]int64

func newUniques(d Definition) uniques {
	u := uniques{}
	for _, c := range d.Columns() {
		if c.Unique {
			u[c.Name] = map[string]int64{}
		}
	}
	return u
}

// see records v, the value of column at line, and returns the error
// naming both lines if an earlier row holds it too.
func (u uniques) see(name, table string, line int64, column string, v any) error {
	seen, ok := u[column]
	if !ok {
		return nil
	}
	var key string
	switch v := v.(type) {
	case string:
		key = v
	case csvCell:
		key = string(v)
	default:
		return nil // a type error, reported by the column's check
	}
	if first, dup := seen[key]; dup {
		return &ValueError{Input: name, Line: line, Column: column,
			Reason: fmt.Sprintf("%s is also the %s of line %d, and %s is unique in a %s table: give each row its own %s, or remove one of the two rows",
				shorten(csvCell(key)), column, first, column, table, column)}
	}
	seen[key] = line
	return nil
}

package yamlcore

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// Where is how a message about a YAML file names its place: "file",
// "file:line" or "file:line:column" (a 0 line or column is left out).
// Every config reader (pipeline files, reward specs, verifiers) starts
// its messages with it.
func Where(file string, line, column int) string {
	if line <= 0 {
		return file
	}
	if column <= 0 {
		return fmt.Sprintf("%s:%d", file, line)
	}
	return fmt.Sprintf("%s:%d:%d", file, line, column)
}

// Position is where node n is written: its 1-based line and column, or
// 0, 0 for a nil node or one without a position.
func Position(n ast.Node) (line, column int) {
	if n == nil {
		return 0, 0
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return 0, 0
	}
	return tk.Position.Line, tk.Position.Column
}

// SyntaxError is a syntax error of the YAML library, placed where a
// reader looks for the mistake.
type SyntaxError struct {
	Line, Column int // 0 when the library gave no position
	Msg          string
	// Hint says what to change, or is "".
	Hint string
}

// Syntax reads an error of the YAML library (from Parse or Decode): its
// message and position, with two positions moved to the mistake. The
// library reports a key indented deeper than the keys above it ("   n: 4"
// under "  k: 1") at the value before it, on the line above, since it
// reads the two lines as one plain scalar ("1 n"); Syntax names the
// line and column of the key. It reports a flow list or mapping that is
// not closed ("k: [1, 2") at the first token after it; Syntax names the
// bracket that opened it. ok is false for an error that is not the
// library's.
func Syntax(err error) (e SyntaxError, ok bool) {
	var ye yaml.Error
	if !errors.As(err, &ye) {
		return SyntaxError{}, false
	}
	e.Msg = firstLine(ye.GetMessage())
	tk := ye.GetToken()
	if tk == nil || tk.Position == nil {
		return e, true
	}
	e.Line, e.Column = tk.Position.Line, tk.Position.Column
	switch next := tk.Next; {
	case next != nil && next.Type == token.MappingValueType && next.Position != nil && next.Position.Line > e.Line &&
		strings.Contains(tk.Value, " "):
		// A plain scalar that ran on to the next line, whose ':' makes it
		// a key: the key is the scalar's last word, on the ':''s line.
		word := tk.Value[strings.LastIndexByte(tk.Value, ' ')+1:]
		e.Line, e.Column = next.Position.Line, max(1, next.Position.Column-len(word))
		e.Msg = fmt.Sprintf("key %q is indented more than the key above it", word)
		e.Hint = "line it up with the keys of its mapping, or indent it under a key that ends with ':'"
	case strings.HasSuffix(e.Msg, "must be specified"):
		if open := opener(tk); open != nil && open.Position.Line < e.Line {
			closer := map[token.Type]string{token.SequenceStartType: "]", token.MappingStartType: "}"}[open.Type]
			e.Msg = fmt.Sprintf("%q is not closed before line %d (%s)", open.Value, e.Line, e.Msg)
			e.Line, e.Column = open.Position.Line, open.Position.Column
			e.Hint = fmt.Sprintf("end the list or mapping with %q on its line", closer)
		}
	}
	return e, true
}

// opener is the '[' or '{' still open at tk: the flow collection the
// library was reading when it met tk.
func opener(tk *token.Token) *token.Token {
	depth := 0
	for p := tk.Prev; p != nil; p = p.Prev {
		switch p.Type {
		case token.SequenceEndType, token.MappingEndType:
			depth++
		case token.SequenceStartType, token.MappingStartType:
			if depth == 0 {
				if p.Position == nil {
					return nil
				}
				return p
			}
			depth--
		}
	}
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Suggest is the "did you mean" hint for a key that is not one of known:
// the known key nearest to it when it is near enough to be a typo (an
// edit distance of at most a third of its length, 1 to 3), else the
// known keys, sorted.
func Suggest(key string, known []string) string {
	best, bestD := "", 1<<30
	for _, a := range known {
		if d := editDistance(strings.ToLower(key), a); d < bestD {
			best, bestD = a, d
		}
	}
	if best != "" && bestD <= max(1, min(3, len(key)/3)) {
		return fmt.Sprintf("did you mean %q?", best)
	}
	return "known keys: " + strings.Join(slices.Sorted(slices.Values(known)), ", ")
}

// editDistance is the Damerau–Levenshtein distance (optimal string
// alignment): insertions, deletions, substitutions and swaps of adjacent
// characters each cost 1.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

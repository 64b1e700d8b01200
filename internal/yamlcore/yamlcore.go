package yamlcore

import (
	"bytes"
	"context"
	"errors"
	"math"
	"regexp"
	"strconv"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

var (
	coreFloat = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)
	coreInf   = regexp.MustCompile(`^[-+]?\.(inf|Inf|INF)$`)
	digits    = regexp.MustCompile(`^[-+]?[0-9]+$`)
)

// IsFloat reports whether Parse reads text, written as a plain scalar, as
// a float (a core-schema float that is not an integer, or an infinity).
// A writer of YAML quotes such a string, so that it reads back as one:
// the library quotes 2.5 itself, but not 1e3.
func IsFloat(text string) bool {
	_, ok := float(text)
	return ok
}

// float reads text as a YAML 1.2 core-schema float that is not an
// integer: the value, and whether text is one. A value out of range is
// ±Inf.
func float(text string) (float64, bool) {
	if digits.MatchString(text) {
		return 0, false // an integer (09 included): the library's to read
	}
	if coreInf.MatchString(text) {
		if text[0] == '-' {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	if !coreFloat.MatchString(text) {
		return 0, false
	}
	f, err := strconv.ParseFloat(text, 64)
	var ne *strconv.NumError
	if err != nil && !(errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange)) {
		return 0, false
	}
	return f, true // ParseFloat gives ±Inf (or ±0) with ErrRange
}

// Parse parses data like parser.ParseBytes(data, 0), then resolves the
// plain scalars of every document by the core schema (Resolve).
func Parse(data []byte) (*ast.File, error) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, err
	}
	for _, doc := range f.Docs {
		if doc != nil {
			doc.Body = Resolve(doc.Body)
		}
	}
	return f, nil
}

// Unmarshal decodes the first document of data into v as
// yaml.UnmarshalWithOptions does, with numbers read by the core schema.
// An empty document leaves v as it is.
func Unmarshal(data []byte, v any, opts ...yaml.DecodeOption) error {
	return UnmarshalContext(context.Background(), data, v, opts...)
}

// UnmarshalContext is Unmarshal with a context for the unmarshalers that
// take one.
func UnmarshalContext(ctx context.Context, data []byte, v any, opts ...yaml.DecodeOption) error {
	f, err := Parse(data)
	if err != nil {
		return err
	}
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			return Decode(ctx, doc.Body, v, opts...)
		}
	}
	return nil
}

// Decode decodes a node (of a file Parse returned) into v.
func Decode(ctx context.Context, n ast.Node, v any, opts ...yaml.DecodeOption) error {
	return yaml.NewDecoder(bytes.NewReader(nil), opts...).DecodeFromNodeContext(ctx, n, v)
}

// Resolve turns the plain scalars below n (n included) that the library
// read as strings, and that the core schema reads as floats, into float
// nodes; it returns what stands in n's place. Mapping keys, quoted
// scalars and the values of tags are left as they are. A float node the
// library made from an out-of-range number gets its ±Inf.
func Resolve(n ast.Node) ast.Node {
	return rewrite(n, func(n ast.Node) ast.Node {
		switch v := n.(type) {
		case *ast.StringNode:
			if v.Token == nil || v.Token.Type != token.StringType {
				return n // quoted
			}
			if f, ok := float(v.Value); ok {
				// The token stays a string token: Text and Restore find
				// the text by it.
				return &ast.FloatNode{BaseNode: v.BaseNode, Token: v.Token, Value: f}
			}
		case *ast.FloatNode:
			if v.Token != nil && v.Token.Type != token.StringType {
				if f, ok := float(v.Token.Value); ok {
					v.Value = f
				}
			}
		}
		return n
	})
}

// Restore turns the float nodes below n that Resolve made, and that
// asText picks, back into the strings they were written as: for a key
// that takes a string, "1e3" stays "1e3" rather than becoming the float's
// "1000". It returns what stands in n's place.
func Restore(n ast.Node, asText func(*ast.FloatNode) bool) ast.Node {
	return rewrite(n, func(n ast.Node) ast.Node {
		if f, ok := n.(*ast.FloatNode); ok {
			if _, resolved := Text(f); resolved && asText(f) {
				return &ast.StringNode{BaseNode: f.BaseNode, Token: f.Token, Value: f.Token.Value}
			}
		}
		return n
	})
}

// rewrite replaces each scalar below n (n included) by what f returns
// for it, in place in its parent; it returns what stands in n's place.
// Keys and the values of tags are not visited.
func rewrite(n ast.Node, f func(ast.Node) ast.Node) ast.Node {
	switch v := n.(type) {
	case *ast.MappingNode:
		for _, mv := range v.Values {
			rewrite(mv, f)
		}
	case *ast.MappingValueNode:
		v.Value = rewrite(v.Value, f)
	case *ast.SequenceNode:
		for i, e := range v.Values {
			r := rewrite(e, f)
			if i < len(v.Entries) && v.Entries[i] != nil && v.Entries[i].Value == e {
				v.Entries[i].Value = r
			}
			v.Values[i] = r
		}
	case *ast.AnchorNode:
		v.Value = rewrite(v.Value, f)
	case *ast.DocumentNode:
		v.Body = rewrite(v.Body, f)
	case ast.ScalarNode:
		return f(n)
	}
	return n
}

// Text is the text a float node was written as, when Resolve made it
// from a plain scalar the library read as a string; ok is false for any
// other node.
func Text(n ast.Node) (string, bool) {
	f, ok := n.(*ast.FloatNode)
	if !ok || f.Token == nil || f.Token.Type != token.StringType {
		return "", false
	}
	return f.Token.Value, true
}

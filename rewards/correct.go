package rewards

import (
	"math"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// defaultCorrectThreshold is the threshold of a `correct:` key that names
// a component and no threshold, as the default rule's.
const defaultCorrectThreshold = 0.5

var knownCorrect = []string{"component", "at_least", "above"}

// correct decodes the spec's `correct:` key: a component name, or a
// mapping of component (omitted: the total) and at most one of at_least
// or above. It runs after the components are read, whatever the key
// order, to check the name.
func (d *specDecoder) correct(n ast.Node) {
	const what = "correct"
	rule := tables.Correctness{Threshold: defaultCorrectThreshold}
	var compNode, atLeast, above ast.Node
	switch v := unwrap(n).(type) {
	case *ast.StringNode:
		compNode = n
	case *ast.MappingNode, *ast.MappingValueNode:
		kvs, ok := d.mapping(n, "", what)
		if !ok {
			return
		}
		if !d.fields(kvs, what, knownCorrect, true, &compNode, &atLeast, &above) {
			return
		}
		if len(kvs) == 0 {
			d.errorf(n, "", "e.g. correct: {component: correct, at_least: 0.5}", "correct is empty")
			return
		}
	default:
		d.errorf(v, "", "e.g. correct: {component: correct, at_least: 0.5}", "correct: expected a component name or a mapping, found %s", describe(n))
		return
	}
	if atLeast != nil && above != nil {
		d.errorf(above, "", "keep one of them", "correct: at_least and above both set")
		return
	}
	if compNode == nil && atLeast == nil && above == nil {
		d.errorf(n, "", "add component, or at_least or above for the total", "correct: names neither a component nor a threshold")
		return
	}
	if compNode != nil {
		name, _, ok := d.str(compNode, "", "correct.component")
		if !ok {
			return
		}
		names := d.spec.ComponentNames()
		if !slices.Contains(names, name) {
			d.errorf(compNode, "", "declared: "+strings.Join(names, ", "), "correct: no component %q", name)
			return
		}
		rule.Component = name
	}
	for _, t := range []struct {
		node  ast.Node
		key   string
		above bool
	}{{atLeast, "at_least", false}, {above, "above", true}} {
		if t.node == nil {
			continue
		}
		x, ok := number(t.node)
		if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
			d.errorf(t.node, "", "write a number such as 0.5 or 1", "correct.%s must be a finite number, found %s", t.key, describe(t.node))
			return
		}
		rule.Threshold, rule.Above = x, t.above
	}
	d.spec.Correct = &rule
}

// number is a YAML integer or float node's value.
func number(n ast.Node) (float64, bool) {
	switch v := unwrap(n).(type) {
	case *ast.IntegerNode:
		switch x := v.Value.(type) {
		case int64:
			return float64(x), true
		case uint64:
			return float64(x), true
		}
	case *ast.FloatNode:
		return v.Value, true
	}
	return 0, false
}

// Correctness is the rule that decides which samples are correct: the
// spec's `correct:` key, else tables.DefaultCorrectness of its components
// (component "correct" ≥ 0.5 when declared, else a total > 0).
func (s *Spec) Correctness() tables.Correctness {
	if s.Correct != nil {
		return *s.Correct
	}
	return tables.DefaultCorrectness(s.ComponentNames())
}

// Correctness is the spec's correctness rule (Spec.Correctness); the
// evaluation and health stages decide correctness with it.
func (p *Program) Correctness() tables.Correctness { return p.spec.Correctness() }

// canonicalCorrect is a declared rule in the digest; a spec without the
// key hashes as it did before the key existed.
type canonicalCorrect struct {
	Component string  `json:"component"`
	Threshold float64 `json:"threshold"`
	Above     bool    `json:"above"`
}

func canonicalCorrectOf(c *tables.Correctness) *canonicalCorrect {
	if c == nil {
		return nil
	}
	return &canonicalCorrect{c.Component, c.Threshold, c.Above}
}

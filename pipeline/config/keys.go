package config

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/rlpipe/rlpipe/internal/registry"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/trackers"
)

// The keys a stage or the policy section takes beside the common ones are
// its kind's (or backend's): the walk learns them from the value the kind
// decodes into, and names the kinds that take a key the node's kind does
// not.

// addField adds one key, name, whose value has type t.
func addField(fields map[string]reflect.StructField, names *[]string, name string, t reflect.Type) {
	if _, dup := fields[name]; dup {
		return
	}
	fields[name] = reflect.StructField{Name: name, Type: t}
	*names = append(*names, name)
}

// addFields adds the yaml keys of v's struct type.
func addFields(fields map[string]reflect.StructField, names *[]string, v any) {
	t := reflect.TypeOf(v)
	if t == nil {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	own, ownNames := fieldsOf(t)
	for _, k := range ownNames {
		if _, dup := fields[k]; !dup {
			fields[k] = own[k]
			*names = append(*names, k)
		}
	}
}

// keysOf are the yaml keys of v's struct type.
func keysOf(v any) []string {
	f := map[string]reflect.StructField{}
	var names []string
	addFields(f, &names, v)
	return names
}

// scalarValue is the string value of key in mapping n ("" when absent).
func scalarValue(n ast.Node, key string) string {
	values, _ := mappingValues(n)
	for _, mv := range values {
		if k, ok := keyString(mv.Key); ok && k == key {
			if s, ok := mv.Value.(*ast.StringNode); ok {
				return s.Value
			}
			return fmt.Sprint(mv.Value)
		}
	}
	return ""
}

// ownKinds are the kinds whose stage node holds their options (not a
// section of their own).
func (d *decoder) ownKinds() []kind.Kind {
	var out []kind.Kind
	for _, k := range d.reg.Kinds {
		if _, sectioned := k.(kind.Sectioned); !sectioned {
			out = append(out, k)
		}
	}
	return out
}

// stageKeys adds the stage kind's keys (every kind's when the kind is
// unknown, so that typos are still found) and says which kinds take a key
// it does not.
func (d *decoder) stageKeys(n ast.Node, path string, fields map[string]reflect.StructField, names *[]string) foreignFunc {
	slot := path[strings.LastIndex(path, ".")+1:]
	k, known := d.reg.Lookup(scalarValue(n, "kind"))
	if !known {
		for _, o := range d.ownKinds() {
			addFields(fields, names, o.New())
		}
		return nil
	}
	if _, sectioned := k.(kind.Sectioned); !sectioned {
		addFields(fields, names, k.New())
	}
	return func(key string) (string, string, bool) {
		var owners, here []kind.Kind
		for _, o := range d.ownKinds() {
			if o.Name() != k.Name() && slices.Contains(keysOf(o.New()), key) {
				owners = append(owners, o)
				if kind.Fills(o, slot) {
					here = append(here, o)
				}
			}
		}
		if len(here) > 0 {
			owners = here
		}
		if len(owners) == 0 {
			return "", "", false
		}
		var nouns, uses []string
		for _, o := range owners {
			nouns = append(nouns, kind.Noun(o))
			use := "use kind: " + o.Name()
			if s := o.Slots(); len(s) == 1 {
				use += " on the " + s[0] + " stage"
			}
			uses = append(uses, use)
		}
		return only(nouns, key), strings.Join(uses, ", or "), true
	}
}

// policyKeys adds the policy backend's keys (every backend's when the kind
// is unknown) and says which backends take a key it does not.
func (d *decoder) policyKeys(n ast.Node, fields map[string]reflect.StructField, names *[]string) foreignFunc {
	return backendKeys(scalarValue(n, "kind"), d.reg.Policies, fields, names, policy.Noun, "the keys that configure ")
}

// trackerKeys is policyKeys for an entry of the tracking section.
func (d *decoder) trackerKeys(n ast.Node, fields map[string]reflect.StructField, names *[]string) foreignFunc {
	noun := func(b trackers.Backend) string { return b.Name() + " trackers" }
	return backendKeys(scalarValue(n, "kind"), d.reg.Trackers, fields, names, noun, "the keys of ")
}

// backend is what a section names by kind and decodes its own keys into.
type backend interface {
	Name() string
	Options() any
}

// backendKeys adds the keys of the backend named name to fields (every
// backend's when none is) and says which other backends take a key it
// does not: noun names a backend's sections in messages, keysOfNoun leads
// the list of its keys.
func backendKeys[B backend](name string, backends []B, fields map[string]reflect.StructField, names *[]string, noun func(B) string, keysOfNoun string) foreignFunc {
	b, known := registry.Find(backends, name)
	if !known {
		for _, o := range backends {
			addFields(fields, names, o.Options())
		}
		return nil
	}
	addFields(fields, names, b.Options())
	return func(key string) (string, string, bool) {
		var nouns, hints []string
		for _, k := range registry.Names(backends) {
			o, _ := registry.Find(backends, k)
			own := keysOf(o.Options())
			if k == name || !slices.Contains(own, key) {
				continue
			}
			sort.Strings(own)
			nouns = append(nouns, noun(o))
			hints = append(hints, fmt.Sprintf("remove it, or use kind: %s; %s%s: %s", k, keysOfNoun, noun(o), strings.Join(own, ", ")))
		}
		if len(nouns) == 0 {
			return "", "", false
		}
		return only(nouns, key), strings.Join(hints, "; or "), true
	}
}

// only says that only these take key: "only rollout stages take
// sampling", "only a cel reward stage takes spec".
func only(nouns []string, key string) string {
	verb := "take"
	if len(nouns) == 1 {
		for _, a := range []string{"a ", "an ", "the "} {
			if strings.HasPrefix(nouns[0], a) {
				verb = "takes"
			}
		}
	}
	return fmt.Sprintf("only %s %s %s", strings.Join(nouns, " or "), verb, key)
}

package registry

import (
	"fmt"
	"slices"
	"strings"
)

// Named is a plug-in value of a list the program assembles (a policy
// backend, a tracker backend, an advantage estimator): what a config
// names it by.
type Named interface{ Name() string }

// Find returns the value of list named name.
func Find[T Named](list []T, name string) (T, bool) {
	for _, v := range list {
		if v.Name() == name {
			return v, true
		}
	}
	var zero T
	return zero, false
}

// Lookup returns the value of list named name, or unknown (the plug-in
// kind's named error) wrapped with the name and the known names:
// `unknown advantage estimator "x": use grpo`.
func Lookup[T Named](list []T, name string, unknown error) (T, error) {
	if v, ok := Find(list, name); ok {
		return v, nil
	}
	var zero T
	return zero, fmt.Errorf("%w %q: use %s", unknown, name, Or(Names(list)))
}

// Names lists the names of list, sorted.
func Names[T Named](list []T) []string {
	out := make([]string, 0, len(list))
	for _, v := range list {
		out = append(out, v.Name())
	}
	slices.Sort(out)
	return out
}

// Or is names for a hint, as the registries' messages list them: "a",
// "a or b or c"; "none" for none.
func Or(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, " or ")
}

package registry

import (
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

package suite_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/rlpipe/rlpipe/internal/suite"
)

// Run names each scenario's subtest group/scenario and gives every
// scenario a fixture made for its own subtest.
func TestRun(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
	)
	check := func(fixture string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fixture)
	}
	t.Run("suite", func(t *testing.T) {
		suite.Run(t, []suite.Group[string]{
			{Name: "A", Scenarios: []suite.Scenario[string]{{Name: "One", Run: check}, {Name: "Two", Run: check}}},
			{Name: "B", Scenarios: []suite.Scenario[string]{{Name: "Three", Run: check}}},
		}, func(t *testing.T) string { return t.Name() })
	})
	slices.Sort(seen)
	want := []string{"TestRun/suite/A/One", "TestRun/suite/A/Two", "TestRun/suite/B/Three"}
	if !slices.Equal(seen, want) {
		t.Errorf("fixtures %q, want %q", seen, want)
	}
}

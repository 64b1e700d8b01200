// Package suite runs a contract's shared test suite, the one body every
// backend of the contract runs (policytest for policies, executortest for
// executors): named groups of named scenarios, each scenario a parallel
// subtest with a fresh fixture of its own. Test code only: it imports
// testing.
package suite

import "testing"

// Scenario is one behaviour, checked on a fresh fixture F.
type Scenario[F any] struct {
	Name string
	Run  func(f F)
}

// Group is a subtest holding the scenarios of one part of a contract.
type Group[F any] struct {
	Name      string
	Scenarios []Scenario[F]
}

// Run runs each group as a subtest of t and each of its scenarios as a
// parallel subtest of the group's, on the fixture fresh makes for that
// subtest.
func Run[F any](t *testing.T, groups []Group[F], fresh func(t *testing.T) F) {
	for _, g := range groups {
		t.Run(g.Name, func(t *testing.T) {
			for _, s := range g.Scenarios {
				t.Run(s.Name, func(t *testing.T) {
					t.Parallel()
					s.Run(fresh(t))
				})
			}
		})
	}
}

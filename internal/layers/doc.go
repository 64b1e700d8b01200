// Package layers holds no code: its test checks the import rules of the
// tree (docs/ARCHITECTURE.md, "Layers").
//
// The engine and the floors below it (artifacts, pipeline, policy,
// sandbox, advantages, internal) import no stage package. A stage package
// (rollouts, rewards, trainers, evaluators, reports, environments)
// imports no package of another stage: what two stages share lives on a
// floor both import. pipeline/config imports no stage package either.
// Composition (cli, examples) may import anything.
//
// Edges that break a rule and are still to be removed are listed in the
// test's debt table, each with the issue that removes it; the test fails
// when a new edge appears and when a listed one is gone, so the table is
// always the true list.
package layers

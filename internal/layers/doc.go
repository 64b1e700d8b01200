// Package layers holds no code: its test checks the import rules of the
// tree (docs/ARCHITECTURE.md, "Layers") on what `go list` reports,
// test imports included.
//
// Every package of the module belongs to one unit (a folder: the longest
// one that holds it), and every unit to one layer. The layers, lowest
// first:
//
//  1. basics: internal (the plug-in registry, scratch directories, the
//     loopback, bounded caches, the Python venvs, the helper processes of
//     tests, the benchmarks' synthetic text, these checks)
//  2. store: artifacts (the store contract, its backends, the table
//     schemas, the run layout)
//  3. floors: policy, sandbox, trackers
//  4. environment contract: environments (Env, the runner, RLEnv), so
//     that the registry holds RL environments as typed values
//  5. engine: pipeline (the engine, its executor contract and executors:
//     executortest, temporalrun)
//  6. advantages
//  7. kind contract: pipeline/kind
//  8. config: pipeline/config
//  9. loop: rollouts, rewards, trainers, evaluators, reports, the
//     environments (environments/agent, arith, datasets, episodes,
//     guess), pipeline/standin, pipeline/driver
//  10. worlds' environments: environments/harbor, which runs other
//     formats' tasks in environments/agent's worlds
//  11. assembly: cli/kinds (the registry), ui
//  12. command: cli (and cli/rlpipe, its main)
//  13. examples: examples, bench
//
// A package imports only its own unit, other units of lower layers, and
// packages outside the module. Units of one layer sit side by side and
// import none of each other: a stage imports no other stage, the driver
// no stage (the kinds a config may name are the registry's that parsed
// it), cli/kinds not ui. So cli and ui are imported only by the layers
// above them, the composition roots.
//
// Tests are held to the same order, with two allowances: a test may use
// another unit of its own layer (the trainers' tests generate their input
// with rollouts), and any test may import the fixtures, pipeline/standin
// (the engine's tests run loops of stand-in stages), cli/kinds (a test
// that needs every kind reads the registry) and the toy environments
// environments/arith and environments/guess (the runner's tests play
// them). A helper package for tests,
// such as policy/vllmserver/vllmtest, is a package like any other, held
// to its unit's layer.
//
// Temporal (go.temporal.io/...) is linked only by pipeline/temporalrun and
// its subpackages, and by the command and the examples, which wire the
// executor: every other package takes an executor as a pipeline.Executor
// value.
//
// Edges that break a rule and are still to be removed are listed in the
// test's debt table, each with the issue that removes it; the test fails
// when a new edge appears and when a listed one is gone, so the table is
// always the true list. A package in no layer fails the test too: place
// its folder in the list.
package layers

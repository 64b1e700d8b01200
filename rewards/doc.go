// Package rewards computes rewards for trajectories from a reward spec: a
// YAML file of named components, each a CEL expression with a weight, and
// a total. It reads a trajectories table and writes a rewards table, one
// row per trajectory, in the same order.
//
// # A spec
//
//	components:
//	  - name: correct
//	    expr: 'num_equal(extract_answer(completion), answer, 1e-6) ? 1.0 : 0.0'
//	    weight: 1.0
//	  - name: format
//	    expr: 'completion.contains("####") ? 1.0 : 0.0'
//	    weight: 0.2
//	total: 'correct * (1.0 + format)'   # optional; default: the weighted sum
//	statuses: [ok]                       # optional: trajectory statuses scored
//	verifiers: [{name: tests, ...}]      # optional: sandboxed checkers
//	judges: [{name: style, ...}]         # optional: model graders
//
// An expression reads the row's variables — completion, num_tokens,
// answer, metadata, row (every dataset column, as Row.Columns gives a
// Python function), verifiers.<name>.passed and more — and calls the
// functions of the reward library: extract_answer, num_equal, regex_find,
// json_get, repetition_ratio and others. docs/REWARDS.md lists them all.
// Each component becomes a column r_<name> of the rewards table.
//
// # Two phases
//
// As with CEL itself, a spec is compiled once and evaluated many times:
//
//	spec, err := rewards.LoadSpec("reward.yaml")     // parse: *SpecError with line and column
//	prog, err := rewards.Compile(spec,                // type-check and plan every expression
//		rewards.WithVerifier("tests", runTests))
//	sum, err := prog.ScoreFile(ctx, dst, src, size, &rewards.ScoreOptions{Prompts: prompts})
//
// Compile reports every problem at once, each naming the spec file, the
// component and the line and column inside the YAML file: an unknown
// variable or function, a type error, a result that is not a number, a
// verifier the spec does not declare, a constant regex that does not
// compile. Check does the same without needing the verifier and judge
// functions.
//
// Compile also plans the common idioms (a library call on row variables,
// a comparison, a condition, arithmetic) as Go closures that skip the CEL
// interpreter; a row where such a plan cannot be sure of CEL's answer (an
// overflow, NaN, a missing prompt) is evaluated by CEL, so results are
// the interpreter's to the bit either way (see nativeFn).
//
// Spec.Digest hashes the parsed spec (not its text: comments and layout do
// not count) together with LibraryVersion. Every reward row carries it in
// spec_digest, so rewards computed under another spec are never mixed up
// with these.
//
// # Errors in rows
//
// Rewards never invent a zero. A trajectory whose status the spec does not
// score (by default anything but "ok": timeouts, infrastructure errors) is
// written with status "skipped: <status>", its error copied, null
// components and a NaN total. An expression that fails on a row — a
// missing map key, parse_number of a word, a verifier that returned an
// error, a prompt missing from the prompts table — marks that row "error"
// with the message "component <name>: <why>", null components and a NaN
// total; a value that is NaN or infinite (a division giving infinity, a
// judge's score) marks it "nonfinite" the same way, the message naming
// the value. The other rows are scored and the file is complete. A
// trainer keeps rows whose status is "ok". The Summary counts each kind
// and keeps the first failures with their row numbers; a batch where no
// row is scored and some are nonfinite has nothing to train on, and
// Task fails on it (Summary.CheckFinite).
//
// # Speed
//
// ScoreFile decodes only the columns the expressions read, scores row
// groups in parallel (ScoreOptions.Concurrency) and writes them in order.
// Variables are resolved through an activation over the current batch's
// columns: strings are views of the decoded buffers, not copies, and each
// variable is converted once per row however many expressions read it.
// Regex patterns that are constants are compiled once, when the program is
// built. Use num_tokens rather than size(completion), which walks the
// string. Score computes one row the same way, for callers that hold rows.
//
// # Verifiers and judges
//
// Verifiers and judges are functions (VerifierFunc, JudgeFunc) from a Row
// to a result; the spec declares them by name and WithVerifier and
// WithJudge supply them (rewards/runners builds them from the spec's
// config: a sandboxed command, a model behind an API). They run for
// scored rows only, several rows at a time
// (ScoreOptions.RunnerConcurrency), and their results are both variables
// of the expressions and JSON columns of the rewards table.
//
// A Python function (functions: in the spec) is a BatchFunc that
// WithFunction supplies (rewards/runners runs it in a sandboxed worker,
// rewards/python): ScoreFile calls it once per batch with the batch's
// scored rows, and its value is functions.NAME, a double. A row it does
// not score takes its status (error or nonfinite) and never reaches an
// expression. Its values are not a column of their own: weigh them in a
// component.
//
// What belongs to one call is given when scoring, never when compiling:
// each call of a verifier or judge receives the Memoizer of the scoring
// call (ScoreOptions.Memo, or Score's memo argument; nil for none), and
// records its slow or paid result through it. A program therefore holds
// no per-call state: compile it once, and score with it from any number
// of task calls at once.
//
//	prog, err := runners.Compile(spec)                             // once per spec
//	sum, err := prog.ScoreFile(ctx, dst, src, size, &rewards.ScoreOptions{Memo: tc}) // per task call
//
// # The reward stage
//
// Task(prog) is the reward stage of the loop, an engine task: it scores an
// iteration's trajectories file (and joins its prompts) into
// rewards.parquet, passing each call's *pipeline.TaskContext as the
// Memoizer, so a retried task, a resumed run or a rescoring replays the
// verdicts and judgments recorded before instead of paying for them
// again. Its version is the spec digest: a new spec invalidates exactly
// the reward tasks, and the same spec, compiled anew by another process,
// finds its cached results.
package rewards

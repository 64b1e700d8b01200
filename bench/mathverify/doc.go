// Package mathverify holds BenchmarkMathVerify: rows a second of
// math-verify, the verifier TRL and open-r1 use, scored by the shipped
// reward function (examples/gsm8k-math-verify/rewards/math_verify_reward.py)
// three ways on the same rows in the same run:
//
//   - worker: through rlpipe's persistent sandboxed Python worker, by the
//     path the loop's reward stage takes (runners.Compile of a spec with
//     functions:, then Program.ScoreFile on a trajectories table: Parquet
//     in, one call per scoring batch over the pipe, rewards table out);
//   - floor: the same function called in a plain Python loop, in a
//     process of the project venv with no sandbox, no pipe, no Parquet;
//   - per_row: today's per-row path, a verifier with the venv as its
//     python: whose checker imports the same function and scores the
//     completion the candidate's run printed: two sandboxes a row, and
//     an interpreter that imports math-verify, 16 rows at once (the
//     loop's default).
//
// It prints worker/floor (target ≥ 0.8, bench/verdict: the medians of
// five rounds that alternate which goes first, each round a new worker
// and a new floor process, each warmed by one row), worker/floor_best
// (the best round of each), worker/per_row, the worker's start (the
// sandbox and math-verify's import: the plan-time check) and
// path_ms/batch, the same path with a function that does no work
// (testdata/noop.py): what the worker costs over the function. The rows
// (320) mix plain and LaTeX answers, right and wrong, some with nothing
// to parse; every way must give the same scores, or the benchmark fails. Skipped without the project venv
// (internal/pyvenv) or when the sandbox's user cannot read its
// interpreter.
package mathverify

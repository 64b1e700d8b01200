// Package runners turns the verifiers and judges a reward spec declares
// into the functions rewards.Compile takes: verifiers run in a bubblewrap
// sandbox (package sandbox), judges ask an OpenAI-compatible model
// (rewards/judge). Compile builds and compiles them in one step:
//
//	prog, err := runners.Compile(spec) // bad runner configs and type errors, before any work
//	task := rewards.Task(prog)         // the reward stage; every call scores with prog
//
// Both kinds are memoized through the rewards.Memoizer each scoring call
// passes (rewards.Task passes the task call's *pipeline.TaskContext), so a
// retried task, a resumed run or a rescoring that meets the same input
// never runs or pays for it again. The memoizer is per call and the
// program is not: one program, compiled once, serves every task call.
//
// A verifier in a spec runs the candidate, then judges what it did with
// code the candidate can neither see nor change:
//
//	verifiers:
//	  - name: tests
//	    files:                       # the candidate's /work, writable
//	      solution.py: "{{.Code}}"   # text/template over Prompt, Completion, Answer, Code, Row, Metadata
//	    harness:                     # read-only at /harness while it runs
//	      run.py: …                  # runs call.py in a child, captured; prints its report and a sentinel
//	      call.py: …                 # imports the solution, prints its results after a nonce
//	    command: [python3, /harness/run.py]
//	    check:                       # a sandbox of its own, after the candidate has exited
//	      command: [python3, /check/check.py]
//	      files:                     # read-only at /check; never visible to the candidate
//	        check.py: …              # reads /candidate/stdout, writes pass or fail to $RLPIPE_VERDICT
//	        expected.json: "[5, 0]"
//	    limits: {cpu_time: 5s, wall: 10s, memory_mb: 256, procs: 32, output_kb: 64, file_mb: 16}
//
// The whole example, in docs/REWARDS.md ("Verifiers that cannot be
// gamed"), is the spec TestRewardHacks plays the known hacks against. The
// harness runs the solution in a child process of its own: a solution
// imported into the harness's process shares its stdout and can print the
// harness's results and sentinel itself.
//
// A template reads the row's dataset columns as one JSON object, {{.Row}}
// (rewards.Row.Columns, what a Python function receives), and the
// metadata's text, {{.Metadata}}; a field that does not exist is an error
// when the spec compiles. A verifier's python: (a venv or an interpreter,
// found by python.Find) is bound read-only into both of its sandboxes,
// first on PATH, so that python3 in its commands imports the venv's
// packages.
//
// For an answer rlpipe can compare itself, expected_stdout: "{{.Answer}}"
// replaces check. A verifier's result in an expression: verifiers.tests.passed,
// .status, .reason, and the candidate's .exit_code, .timed_out, .stdout.
// A sandbox that cannot start marks the row's status "error" — it is never
// a reward of 0. docs/REWARDS.md ("Verifiers that cannot be gamed") says
// why the checker is never run beside the candidate.
//
// A Python function (functions:) runs in a persistent sandboxed worker
// (rewards/python), a pool per interpreter (one worker unless a function
// asks for more with workers:), started by Compile: the import
// of every function is checked there, an error at the function's line.
// Expressions read functions.NAME; docs/REWARDS.md ("Python functions").
//
// A judge takes the fields of judge.Config (base_url, model, api_key_env,
// rubric, min, max, …); expressions read judges.NAME.score and .status.
package runners

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/judge"
)

// Compile compiles spec with its verifiers and judges (Options) and any
// extra options. It is the check before any work, too: a runner config
// that does not decode, a judge whose API key variable is unset, a type
// error in an expression all fail here.
func Compile(spec *rewards.Spec, extra ...rewards.Option) (*rewards.Program, error) {
	opts, err := Options(spec)
	if err != nil {
		return nil, err
	}
	return rewards.Compile(spec, append(opts, extra...)...)
}

// Options builds the compile options for spec's verifiers, judges and
// Python functions (each function's worker is started here: see
// functionOptions).
// They memoize through the Memoizer each scoring call gives them
// (rewards.ScoreOptions.Memo; none when it is nil).
func Options(spec *rewards.Spec) ([]rewards.Option, error) {
	var opts []rewards.Option
	for _, r := range spec.Verifiers {
		var c VerifierConfig
		if err := decode(spec.Name, "verifier", r, &c); err != nil {
			return nil, err
		}
		if ps := checkLimits(c); len(ps) > 0 {
			return nil, runnerError(spec.Name, "verifier", r, ps...)
		}
		f, err := verifier(r.Name, filepath.Dir(spec.Name), c)
		if err != nil {
			p := problem{msg: err.Error()}
			if ke := (*keyError)(nil); errors.As(err, &ke) {
				p.at = ke.at
			}
			return nil, runnerError(spec.Name, "verifier", r, p)
		}
		opts = append(opts, rewards.WithVerifier(r.Name, f))
	}
	for _, r := range spec.Judges {
		var c judge.Config
		if err := decode(spec.Name, "judge", r, &c); err != nil {
			return nil, err
		}
		if c.Name == "" {
			c.Name = r.Name
		}
		j, err := judge.New(c, nil)
		if err != nil {
			return nil, runnerError(spec.Name, "judge", r, problem{msg: err.Error(), err: err})
		}
		opts = append(opts, rewards.WithJudge(r.Name, func(ctx context.Context, row rewards.Row, memo rewards.Memoizer) (rewards.JudgeResult, error) {
			res, err := j.Score(ctx, judge.Input{Prompt: row.Prompt.Prompt, Completion: row.Trajectory.Completion, Answer: row.Prompt.Answer}, memo)
			if err != nil {
				return rewards.JudgeResult{}, err
			}
			return rewards.JudgeResult{Score: res.Score, Status: res.Status, Reason: res.Reason}, nil
		}))
	}
	fns, err := functionOptions(spec)
	if err != nil {
		return nil, err
	}
	return append(opts, fns...), nil
}

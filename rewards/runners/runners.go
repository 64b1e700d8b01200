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
//	      solution.py: "{{.Code}}"   # text/template over Prompt, Completion, Answer, Code
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
// For an answer rlpipe can compare itself, expected_stdout: "{{.Answer}}"
// replaces check. A verifier's result in an expression: verifiers.tests.passed,
// .status, .reason, and the candidate's .exit_code, .timed_out, .stdout.
// A sandbox that cannot start marks the row's status "error" — it is never
// a reward of 0. docs/REWARDS.md ("Verifiers that cannot be gamed") says
// why the checker is never run beside the candidate.
//
// A judge takes the fields of judge.Config (base_url, model, api_key_env,
// rubric, min, max, …); expressions read judges.NAME.score and .status.
package runners

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/rlpipe/rlpipe/internal/yamlcore"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/judge"
)

// decode re-encodes a runner's config map and decodes it strictly into v,
// so an unknown key is an error naming the runner. A key that takes an
// integer must be given one: the YAML library would truncate 2.5 to 2
// and read 1e3 as 1000.
func decode(kind string, r rewards.Runner, v any) error {
	if msg := integers(reflect.TypeOf(v), r.Config, ""); msg != "" {
		return fmt.Errorf("%s %q (line %d): %s", kind, r.Name, r.Pos.Line, msg)
	}
	b, err := yaml.Marshal(r.Config)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalWithOptions(b, v, yaml.Strict()); err != nil {
		return fmt.Errorf("%s %q (line %d): %v", kind, r.Name, r.Pos.Line, yaml.FormatError(err, false, false))
	}
	return nil
}

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

// Options builds the compile options for spec's verifiers and judges.
// They memoize through the Memoizer each scoring call gives them
// (rewards.ScoreOptions.Memo; none when it is nil).
func Options(spec *rewards.Spec) ([]rewards.Option, error) {
	var opts []rewards.Option
	for _, r := range spec.Verifiers {
		var c VerifierConfig
		if err := decode("verifier", r, &c); err != nil {
			return nil, err
		}
		f, err := verifier(r.Name, c)
		if err != nil {
			return nil, fmt.Errorf("verifier %q (line %d): %w", r.Name, r.Pos.Line, err)
		}
		opts = append(opts, rewards.WithVerifier(r.Name, f))
	}
	for _, r := range spec.Judges {
		var c judge.Config
		if err := decode("judge", r, &c); err != nil {
			return nil, err
		}
		if c.Name == "" {
			c.Name = r.Name
		}
		j, err := judge.New(c, nil)
		if err != nil {
			return nil, fmt.Errorf("judge %q (line %d): %w", r.Name, r.Pos.Line, err)
		}
		opts = append(opts, rewards.WithJudge(r.Name, func(ctx context.Context, row rewards.Row, memo rewards.Memoizer) (rewards.JudgeResult, error) {
			res, err := j.Score(ctx, judge.Input{Prompt: row.Prompt.Prompt, Completion: row.Trajectory.Completion, Answer: row.Prompt.Answer}, memo)
			if err != nil {
				return rewards.JudgeResult{}, err
			}
			return rewards.JudgeResult{Score: res.Score, Status: res.Status, Reason: res.Reason}, nil
		}))
	}
	return opts, nil
}

var durationType = reflect.TypeFor[time.Duration]()

// integers checks that every key of config that t (a struct, a map or a
// list of them) types as an integer holds an integer, as the pipeline
// file's keys do: it returns what is wrong, naming the key, or "". A
// string is left to the YAML library unless it reads as a float (1e3).
func integers(t reflect.Type, config any, path string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := config.(map[string]any)
		if !ok {
			return ""
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if v, ok := m[name]; ok && name != "" && name != "-" {
				if msg := integers(f.Type, v, join(path, name)); msg != "" {
					return msg
				}
			}
		}
	case reflect.Map:
		if m, ok := config.(map[string]any); ok {
			for k, v := range m {
				if msg := integers(t.Elem(), v, join(path, k)); msg != "" {
					return msg
				}
			}
		}
	case reflect.Slice:
		if l, ok := config.([]any); ok {
			for i, v := range l {
				if msg := integers(t.Elem(), v, fmt.Sprintf("%s[%d]", path, i)); msg != "" {
					return msg
				}
			}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if t == durationType {
			return ""
		}
		switch x := config.(type) {
		case float64:
			return fmt.Sprintf("%s: expected an integer, got %v", path, x)
		case string:
			if yamlcore.IsFloat(x) {
				return fmt.Sprintf("%s: expected an integer, got %s", path, x)
			}
		}
	}
	return ""
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

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
// A verifier in a spec:
//
//	verifiers:
//	  - name: tests
//	    command: [python3, check.py]
//	    files:                       # written into the sandbox's /work
//	      solution.py: "{{.Code}}"   # text/template over Prompt, Completion, Answer, Code
//	      check.py: |
//	        from solution import add
//	        assert add(2, 3) == 5
//	    limits: {cpu_time: 5s, wall: 10s, memory_mb: 256, procs: 32, output_kb: 64, file_mb: 16}
//
// and its result in an expression: verifiers.tests.passed,
// verifiers.tests.exit_code, verifiers.tests.timed_out, verifiers.tests.stdout.
// A sandbox that cannot start marks the row's status "error" — it is never
// a reward of 0.
//
// A judge takes the fields of judge.Config (base_url, model, api_key_env,
// rubric, min, max, …); expressions read judges.NAME.score and .status.
package runners

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"text/template"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/judge"
	"github.com/rlpipe/rlpipe/sandbox"
)

// VerifierConfig is a verifier's configuration in a spec.
type VerifierConfig struct {
	Command []string          `yaml:"command"`
	Files   map[string]string `yaml:"files"`
	Stdin   string            `yaml:"stdin"`
	Limits  struct {
		CPUTime  time.Duration `yaml:"cpu_time"`
		Wall     time.Duration `yaml:"wall"`
		MemoryMB int64         `yaml:"memory_mb"`
		Procs    int           `yaml:"procs"`
		OutputKB int64         `yaml:"output_kb"`
		FileMB   int64         `yaml:"file_mb"`
	} `yaml:"limits"`
	// PassExitCode is the exit code that means passed (default 0).
	PassExitCode int `yaml:"pass_exit_code"`
}

// decode re-encodes a runner's config map and decodes it strictly into v,
// so an unknown key is an error naming the runner.
func decode(kind string, r rewards.Runner, v any) error {
	b, err := yaml.Marshal(r.Config)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalWithOptions(b, v, yaml.Strict()); err != nil {
		return fmt.Errorf("%s %q (line %d): %v", kind, r.Name, r.Pos.Line, yaml.FormatError(err, false, false))
	}
	return nil
}

// fileData is what a verifier's file templates see.
type fileData struct {
	Prompt, Completion, Answer string
	// Code is the first fenced code block of the completion, or the whole
	// completion when it has none.
	Code string
}

var reFence = regexp.MustCompile("(?s)```[a-zA-Z0-9_+-]*\\n(.*?)```")

func codeOf(completion string) string {
	if m := reFence.FindStringSubmatch(completion); m != nil {
		return m[1]
	}
	return completion
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
			return nil, err
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

func verifier(name string, c VerifierConfig) (rewards.VerifierFunc, error) {
	if len(c.Command) == 0 {
		return nil, fmt.Errorf("verifier %q: command is required", name)
	}
	tmpls := map[string]*template.Template{}
	for file, text := range c.Files {
		t, err := template.New(file).Option("missingkey=error").Parse(text)
		if err != nil {
			return nil, fmt.Errorf("verifier %q: file %s: %v", name, file, err)
		}
		tmpls[file] = t
	}
	limits := sandbox.Limits{CPUTime: c.Limits.CPUTime, Wall: c.Limits.Wall, MemoryBytes: c.Limits.MemoryMB << 20,
		Procs: c.Limits.Procs, OutputBytes: c.Limits.OutputKB << 10, FileBytes: c.Limits.FileMB << 20}
	return func(ctx context.Context, row rewards.Row, memo rewards.Memoizer) (rewards.VerifierResult, error) {
		d := fileData{Prompt: row.Prompt.Prompt, Completion: row.Trajectory.Completion, Answer: row.Prompt.Answer, Code: codeOf(row.Trajectory.Completion)}
		files := map[string][]byte{}
		for file, t := range tmpls {
			var b bytes.Buffer
			if err := t.Execute(&b, d); err != nil {
				return rewards.VerifierResult{}, fmt.Errorf("verifier %q: file %s: %v", name, file, err)
			}
			files[file] = b.Bytes()
		}
		spec := sandbox.Spec{Command: c.Command, Files: files, Stdin: []byte(c.Stdin), Limits: limits}
		run := func(ctx context.Context) (any, error) {
			res, err := sandbox.Run(ctx, spec)
			if err != nil {
				return nil, err // infrastructure: not recorded, the row errors
			}
			exited := res.Status == sandbox.StatusOK || res.Status == sandbox.StatusFailed // not killed by a limit
			return rewards.VerifierResult{Passed: exited && res.ExitCode == c.PassExitCode,
				ExitCode: res.ExitCode, Stdout: res.Stdout, TimedOut: res.TimedOut, Status: string(res.Status)}, nil
		}
		if memo == nil {
			v, err := run(ctx)
			if err != nil {
				return rewards.VerifierResult{}, err
			}
			return v.(rewards.VerifierResult), nil
		}
		var out rewards.VerifierResult
		key := map[string]any{"verifier": name, "command": c.Command, "files": files, "stdin": c.Stdin, "limits": limits, "pass": c.PassExitCode}
		err := memo.Memo(ctx, key, &out, run)
		return out, err
	}, nil
}

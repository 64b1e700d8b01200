package runners

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/python"
	"github.com/rlpipe/rlpipe/sandbox"
)

// VerifierConfig is a verifier's configuration in a spec. A verifier runs
// the candidate's code in one sandbox and judges it in another, after the
// candidate has exited, with files the candidate never sees: see the
// package documentation and docs/REWARDS.md.
type VerifierConfig struct {
	// Command is the candidate's run, in /work.
	Command []string `yaml:"command"`
	// Files are the candidate's workspace (/work, writable): what the
	// model wrote, and inputs it may change. Never a checker or an answer.
	Files map[string]string `yaml:"files"`
	// Harness are files read-only at /harness during the candidate's run:
	// the code that imports and exercises the solution and prints what
	// the checker judges. The candidate can read them, not change them.
	Harness map[string]string `yaml:"harness"`
	Stdin   string            `yaml:"stdin"`
	// Check judges the candidate's run, in a sandbox of its own.
	Check *CheckConfig `yaml:"check"`
	// ExpectedStdout, instead of Check: the run passes when its stdout,
	// white space trimmed at both ends, is this text (a template, e.g.
	// "{{.Answer}}"). rlpipe compares; the text never enters a sandbox.
	ExpectedStdout *string `yaml:"expected_stdout"`
	// Python is a venv or an interpreter (relative to the spec's
	// directory) that both sandboxes see read-only, as a Python
	// function's worker does, with its directory first on PATH: python3
	// in a command is its, and imports its packages. Found when the spec
	// is compiled; "" leaves the sandbox's own PATH.
	Python string `yaml:"python"`
	// Verdict "exit_code" keeps the unsafe verdict of older specs: the
	// candidate's run passes when it exits PassExitCode. Code in the run
	// decides that exit code, so a solution that calls os._exit(0), or
	// rewrites a checker beside it, passes.
	Verdict      string `yaml:"verdict"`
	PassExitCode int    `yaml:"pass_exit_code"`
	Limits       struct {
		CPUTime  time.Duration `yaml:"cpu_time"`
		Wall     time.Duration `yaml:"wall"`
		MemoryMB int64         `yaml:"memory_mb"`
		Procs    int           `yaml:"procs"`
		OutputKB int64         `yaml:"output_kb"`
		FileMB   int64         `yaml:"file_mb"`
	} `yaml:"limits"`
}

// CheckConfig is a verifier's checker: a command run after the candidate
// has exited, in a new sandbox that sees
//
//   - /check: Files, read-only (the checker, the tests, expected outputs);
//   - /candidate: the candidate's run, read-only: stdout, stderr,
//     exit_code and status (text files);
//   - RLPIPE_VERDICT: the path the checker writes its verdict to, "pass"
//     or "fail", optionally followed by ": " and a reason.
//
// The verdict is read from that channel, never from the checker's exit
// code; a checker that writes none fails the row's verifier with status
// "no_verdict". The checker must not run the candidate's code: judge what
// the candidate printed.
type CheckConfig struct {
	Command []string          `yaml:"command"`
	Files   map[string]string `yaml:"files"`
}

// Where a verifier's files are in its sandboxes.
const (
	harnessDir   = "/harness"
	checkDir     = "/check"
	candidateDir = "/candidate"
)

// Statuses a verifier reports besides the sandbox's own.
const (
	// StatusNoVerdict: the checker wrote no valid verdict.
	StatusNoVerdict = "no_verdict"
	// StatusTampered: the candidate tried to write the harness or reach
	// the checker's files; it scores as a failure.
	StatusTampered = "tampered"
)

// fileData is what a verifier's file templates see (templateFields).
type fileData struct {
	Prompt, Completion, Answer string
	// Code is the first fenced code block of the completion, or the whole
	// completion when it has none.
	Code string
	// Row is the row's dataset columns (rewards.Row.Columns) as one JSON
	// object; Metadata the prompt's metadata as its text. Each is set
	// only when a template reads it.
	Row, Metadata string
}

var reFence = regexp.MustCompile("(?s)```[a-zA-Z0-9_+-]*\\n(.*?)```")

func codeOf(completion string) string {
	if m := reFence.FindStringSubmatch(completion); m != nil {
		return m[1]
	}
	return completion
}

// templates parses a file set's templates; field names the set in errors.
type templates map[string]*template.Template

func parseTemplates(field string, files map[string]string, r *reads) (templates, error) {
	out := templates{}
	for name, text := range files {
		if name == "" || path.IsAbs(name) || path.Clean(name) != name || strings.HasPrefix(name, "../") || name == ".." {
			return nil, fmt.Errorf("%s: file %q: want a clean relative path", field, name)
		}
		t, err := template.New(name).Option("missingkey=error").Parse(text)
		if err != nil {
			return nil, &keyError{at: field + "." + name, msg: fmt.Sprintf("%s: file %s: %v", field, name, err)}
		}
		if err := checkFields(t, field+"."+name, fmt.Sprintf("%s: file %s", field, name), r); err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, nil
}

// render executes the templates, keyed by name under dir ("" keeps the
// names relative).
func (ts templates) render(field, dir string, d fileData) (map[string][]byte, error) {
	files := make(map[string][]byte, len(ts))
	for name, t := range ts {
		var b bytes.Buffer
		if err := t.Execute(&b, d); err != nil {
			return nil, fmt.Errorf("%s: file %s: %v", field, name, err)
		}
		if dir != "" {
			name = path.Join(dir, name)
		}
		files[name] = b.Bytes()
	}
	return files, nil
}

// unsafeLayout is the error for a spec whose verdict would be the exit
// code of the candidate's run.
func unsafeLayout(c VerifierConfig) error {
	beside := ""
	if len(c.Files) > 0 {
		beside = fmt.Sprintf(", beside files it can rewrite (files: %s)", strings.Join(slices.Sorted(maps.Keys(c.Files)), ", "))
	}
	return fmt.Errorf("the verdict would be the exit code of the run that executes the candidate's code%s: "+
		"a solution that calls os._exit(0) at import, or rewrites the checker and runs it, would pass. "+
		"Judge the run with check: {command, files} (read-only, run after the candidate has exited) "+
		"or compare its output with expected_stdout; see \"Verifiers that cannot be gamed\" in docs/REWARDS.md. "+
		"To keep the exit code as the verdict anyway, set verdict: exit_code", beside)
}

// verifier builds the VerifierFunc of c, declared in a spec in dir.
func verifier(name, dir string, c VerifierConfig) (rewards.VerifierFunc, error) {
	if len(c.Command) == 0 {
		return nil, errors.New("command is required")
	}
	switch {
	case c.Verdict != "" && c.Verdict != "exit_code":
		return nil, fmt.Errorf("verdict: %q is not a verdict; the only value is exit_code (unsafe), else leave it out and give check or expected_stdout", c.Verdict)
	case c.Verdict == "exit_code" && (c.Check != nil || c.ExpectedStdout != nil):
		return nil, errors.New("verdict: exit_code and check or expected_stdout contradict each other: the checker's verdict decides; remove verdict")
	case c.Verdict == "" && c.Check == nil && c.ExpectedStdout == nil:
		return nil, unsafeLayout(c)
	case c.Check != nil && c.ExpectedStdout != nil:
		return nil, errors.New("check and expected_stdout: give one")
	case c.Verdict == "" && c.PassExitCode != 0:
		return nil, errors.New("pass_exit_code: only with verdict: exit_code; the checker's verdict decides whether a run passes")
	case c.Check != nil && len(c.Check.Command) == 0:
		return nil, errors.New("check: command is required, e.g. [python3, /check/check.py]")
	}
	v := &verifierRun{name: name, c: c}
	var err error
	if v.files, err = parseTemplates("files", c.Files, &v.reads); err != nil {
		return nil, err
	}
	if v.harness, err = parseTemplates("harness", c.Harness, &v.reads); err != nil {
		return nil, err
	}
	if c.Check != nil {
		if v.check, err = parseTemplates("check.files", c.Check.Files, &v.reads); err != nil {
			return nil, err
		}
	}
	if c.ExpectedStdout != nil {
		if v.expected, err = template.New("expected_stdout").Option("missingkey=error").Parse(*c.ExpectedStdout); err != nil {
			return nil, &keyError{at: "expected_stdout", msg: fmt.Sprintf("expected_stdout: %v", err)}
		}
		if err := checkFields(v.expected, "expected_stdout", "expected_stdout", &v.reads); err != nil {
			return nil, err
		}
	}
	if v.python, err = findPython(context.Background(), dir, c.Python); err != nil {
		return nil, err
	}
	v.limits = sandbox.Limits{CPUTime: c.Limits.CPUTime, Wall: c.Limits.Wall, MemoryBytes: c.Limits.MemoryMB << 20,
		Procs: c.Limits.Procs, OutputBytes: c.Limits.OutputKB << 10, FileBytes: c.Limits.FileMB << 20}
	return v.score, nil
}

// verifierRun is one verifier, compiled.
type verifierRun struct {
	name                  string
	c                     VerifierConfig
	files, harness, check templates
	expected              *template.Template
	limits                sandbox.Limits
	reads                 reads
	python                *python.Interpreter // nil without python:
}

func (v *verifierRun) score(ctx context.Context, row rewards.Row, memo rewards.Memoizer) (rewards.VerifierResult, error) {
	d := fileData{Prompt: row.Prompt.Prompt, Completion: row.Trajectory.Completion, Answer: row.Prompt.Answer, Code: codeOf(row.Trajectory.Completion)}
	if err := v.reads.rowData(&d, &row); err != nil {
		return rewards.VerifierResult{}, err
	}
	files, err := v.files.render("files", "", d)
	if err != nil {
		return rewards.VerifierResult{}, err
	}
	harness, err := v.harness.render("harness", harnessDir, d)
	if err != nil {
		return rewards.VerifierResult{}, err
	}
	check, err := v.check.render("check.files", checkDir, d)
	if err != nil {
		return rewards.VerifierResult{}, err
	}
	var expected *string
	if v.expected != nil {
		var b bytes.Buffer
		if err := v.expected.Execute(&b, d); err != nil {
			return rewards.VerifierResult{}, fmt.Errorf("expected_stdout: %v", err)
		}
		e := b.String()
		expected = &e
	}
	run := func(ctx context.Context) (any, error) {
		return v.run(ctx, files, harness, check, expected)
	}
	if memo == nil {
		out, err := run(ctx)
		if err != nil {
			return rewards.VerifierResult{}, err
		}
		return out.(rewards.VerifierResult), nil
	}
	var out rewards.VerifierResult
	key := map[string]any{"verifier": v.name, "command": v.c.Command, "files": files, "harness": harness, "stdin": v.c.Stdin,
		"limits": v.limits, "pass": v.c.PassExitCode, "verdict": v.c.Verdict}
	if v.c.Check != nil {
		key["check"] = map[string]any{"command": v.c.Check.Command, "files": check}
	}
	if expected != nil {
		key["expected_stdout"] = *expected
	}
	v.reads.memoKey(key, &d)
	if v.python != nil {
		key["python"] = map[string]string{"path": v.c.Python, "version": v.python.Version}
	}
	err = memo.Memo(ctx, key, &out, run)
	return out, err
}

// run runs the candidate, then judges it. An error means no verdict (the
// sandbox could not start) and is never recorded as a result.
func (v *verifierRun) run(ctx context.Context, files, harness, check map[string][]byte, expected *string) (rewards.VerifierResult, error) {
	res, err := sandbox.Run(ctx, withPython(sandbox.Spec{Command: v.c.Command, Files: files, ReadOnlyFiles: harness,
		Stdin: []byte(v.c.Stdin), Limits: v.limits}, v.python))
	if err != nil {
		return rewards.VerifierResult{}, err
	}
	out := rewards.VerifierResult{ExitCode: res.ExitCode, Stdout: res.Stdout, TimedOut: res.TimedOut, Status: string(res.Status)}
	exited := res.Status == sandbox.StatusOK || res.Status == sandbox.StatusFailed // not stopped by a limit
	if v.c.Verdict == "exit_code" {
		out.Passed = exited && res.ExitCode == v.c.PassExitCode
		return out, nil
	}
	if attempt := tampering(res); attempt != "" {
		out.Status, out.Reason = StatusTampered, attempt
		return out, nil
	}
	if !exited && res.Status != sandbox.StatusKilled {
		out.Reason = "the candidate's run was stopped by a limit (" + string(res.Status) + ")"
		return out, nil
	}
	if expected != nil {
		if strings.TrimSpace(res.Stdout) == strings.TrimSpace(*expected) {
			out.Passed, out.Status = true, string(sandbox.StatusOK)
		} else {
			out.Status, out.Reason = string(sandbox.StatusFailed), "stdout is not the expected output"
		}
		return out, nil
	}
	given := maps.Clone(check)
	given[candidateDir+"/stdout"] = []byte(res.Stdout)
	given[candidateDir+"/stderr"] = []byte(res.Stderr)
	given[candidateDir+"/exit_code"] = []byte(strconv.Itoa(res.ExitCode) + "\n")
	given[candidateDir+"/status"] = []byte(string(res.Status) + "\n")
	cr, err := sandbox.Run(ctx, withPython(sandbox.Spec{Command: v.c.Check.Command, ReadOnlyFiles: given, Verdict: true, Limits: v.limits}, v.python))
	if err != nil {
		return rewards.VerifierResult{}, fmt.Errorf("checker: %w", err)
	}
	passed, reason, ok := parseVerdict(cr.Verdict)
	switch {
	case !ok:
		out.Status = StatusNoVerdict
		out.Reason = fmt.Sprintf("the checker (status %s, exit %d) wrote no verdict to $%s (want pass or fail: reason)", cr.Status, cr.ExitCode, sandbox.EnvVerdict)
		if cr.Verdict != "" {
			out.Reason = fmt.Sprintf("the checker wrote %q to $%s; want pass or fail: reason", firstLine(cr.Verdict), sandbox.EnvVerdict)
		}
		if msg := strings.TrimSpace(cr.Stderr); msg != "" {
			out.Reason += ": " + lastLine(msg)
		}
	case passed:
		out.Passed, out.Status, out.Reason = true, string(sandbox.StatusOK), reason
	default:
		out.Status, out.Reason = string(sandbox.StatusFailed), reason
	}
	return out, nil
}

// parseVerdict reads a checker's verdict: "pass" or "fail", in any case,
// optionally followed by ":" or white space and a reason.
func parseVerdict(s string) (passed bool, reason string, ok bool) {
	line := strings.TrimSpace(firstLine(s))
	word, rest := line, ""
	if i := strings.IndexAny(line, ": \t"); i >= 0 {
		word, rest = line[:i], line[i:]
	}
	reason = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
	switch strings.ToLower(word) {
	case "pass":
		return true, reason, true
	case "fail":
		return false, reason, true
	}
	return false, "", false
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func lastLine(s string) string {
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// tampering names an attempt on the checker's files seen in the
// candidate's run: a write refused on the read-only harness, or any access
// to the checker's directory, which the candidate's sandbox does not
// have. The candidate controls its own output, so faking such a line only
// scores it 0.
func tampering(r sandbox.Result) string {
	for _, line := range strings.Split(r.Stderr+"\n"+r.Stdout, "\n") {
		switch {
		case strings.Contains(line, harnessDir+"/") && strings.Contains(line, "Read-only file system"):
			return "the candidate tried to change the harness: " + strings.TrimSpace(line)
		case strings.Contains(line, checkDir+"/") && hasAny(line, "No such file or directory", "Read-only file system", "Permission denied"):
			return "the candidate tried to reach the checker's files: " + strings.TrimSpace(line)
		}
	}
	return ""
}

func hasAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

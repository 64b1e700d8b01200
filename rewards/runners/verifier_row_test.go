package runners_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/python"
	"github.com/rlpipe/rlpipe/rewards/python/pythontest"
	"github.com/rlpipe/rlpipe/rewards/runners"
)

// rowSpec shows a verifier's candidate the row's columns (.Row) and the
// metadata's text (.Metadata); its stdout is what they rendered to.
const rowSpec = `verifiers:
  - name: show
    files:
      row.json: "{{.Row}}\n"
      meta.txt: "{{.Metadata}}"
    command: [cat, row.json, meta.txt]
    expected_stdout: "{{.Answer}}"
components:
  - name: shown
    expr: 'verifiers.show.stdout != "" ? 1.0 : 0.0'
`

func metadataRow(metadata string) rewards.Row {
	return rewards.Row{
		Trajectory: tables.Trajectory{PromptID: "p1", SampleIndex: 1, Completion: "40*(94 - 90) + 83 - 74", FinishReason: "stop", NumTokens: 12, Status: tables.StatusOK},
		Prompt:     tables.Prompt{PromptID: "p1", Answer: "169", Metadata: metadata, Source: "rg:countdown", Split: "train"},
		HasPrompt:  true}
}

// verifierOutput scores row with prog and returns the verifier's result.
func verifierOutput(t *testing.T, prog *rewards.Program, name string, row rewards.Row, memo rewards.Memoizer) rewards.VerifierResult {
	t.Helper()
	r, err := prog.Score(context.Background(), row, memo)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != tables.StatusOK {
		t.Fatalf("row status %q: %v", r.Status, *r.Error)
	}
	var outs map[string]rewards.VerifierResult
	if err := json.Unmarshal([]byte(r.VerifierOutputs), &outs); err != nil {
		t.Fatalf("verifier outputs %q: %v", r.VerifierOutputs, err)
	}
	return outs[name]
}

// TestVerifierRow: .Row is Row.Columns as one JSON object, the columns a
// Python function receives; .Metadata is the metadata's text as it is,
// so metadata that is not a JSON object reads {} in .Row and as written
// in .Metadata.
func TestVerifierRow(t *testing.T) {
	prog := compile(t, rowSpec)
	for _, c := range []struct{ name, metadata, want string }{
		{"a JSON object", `{"numbers": [83, 94], "target": 169, "op": "<&>"}`,
			`{"answer":"169","finish_reason":"stop","metadata":{"numbers":[83,94],"op":"<&>","target":169},"num_tokens":12,"prompt_id":"p1","sample_index":1,"source":"rg:countdown","split":"train","status":"ok"}` + "\n" +
				`{"numbers": [83, 94], "target": 169, "op": "<&>"}`},
		{"not JSON", `target=169`,
			`{"answer":"169","finish_reason":"stop","metadata":{},"num_tokens":12,"prompt_id":"p1","sample_index":1,"source":"rg:countdown","split":"train","status":"ok"}` + "\n" + `target=169`},
		{"a JSON list", `[1, 2]`,
			`{"answer":"169","finish_reason":"stop","metadata":{},"num_tokens":12,"prompt_id":"p1","sample_index":1,"source":"rg:countdown","split":"train","status":"ok"}` + "\n" + `[1, 2]`},
		{"none", ``,
			`{"answer":"169","finish_reason":"stop","metadata":{},"num_tokens":12,"prompt_id":"p1","sample_index":1,"source":"rg:countdown","split":"train","status":"ok"}` + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := verifierOutput(t, prog, "show", metadataRow(c.metadata), nil)
			if got.Stdout != c.want {
				t.Fatalf("the candidate saw\n%s\nwant\n%s", got.Stdout, c.want)
			}
		})
	}
}

// TestVerifierRowMemoKey: a verifier whose templates read .Row keys its
// memo on the row's columns, even where the rendered files do not show
// them; one that reads neither .Row nor .Metadata keeps the key it had.
func TestVerifierRowMemoKey(t *testing.T) {
	keys := func(t *testing.T, spec string, rows ...rewards.Row) []map[string]any {
		prog := compile(t, spec)
		m := &memoTable{}
		for _, r := range rows {
			verifierOutput(t, prog, "v", r, m)
		}
		var out []map[string]any
		for k := range m.records {
			var key map[string]any
			if err := json.Unmarshal([]byte(k), &key); err != nil {
				t.Fatal(err)
			}
			out = append(out, key)
		}
		return out
	}
	t.Run("without .Row the key is the one it was", func(t *testing.T) {
		got := keys(t, expectedSpec2("{{.Answer}}"), metadataRow(`{"a": 1}`), metadataRow(`{"a": 2}`))
		if len(got) != 1 {
			t.Fatalf("%d keys for two rows that differ only in metadata, want 1: %v", len(got), got)
		}
		var names []string
		for k := range got[0] {
			names = append(names, k)
		}
		slices.Sort(names)
		if want := "command expected_stdout files harness limits pass stdin verdict verifier"; strings.Join(names, " ") != want {
			t.Fatalf("key members %v, want %s", names, want)
		}
	})
	t.Run("with .Row the key holds the row's columns", func(t *testing.T) {
		got := keys(t, expectedSpec2("{{if .Row}}{{.Answer}}{{end}}"), metadataRow(`{"a": 1}`), metadataRow(`{"a": 2}`))
		if len(got) != 2 {
			t.Fatalf("%d keys for two rows whose metadata differs, want 2: %v", len(got), got)
		}
		for _, k := range got {
			row, _ := k["row"].(string)
			if !strings.Contains(row, `"metadata":{"a":`) {
				t.Fatalf("key %v has no row columns", k)
			}
		}
	})
	// {{.}} and {{$}} may print every field: the key holds the row too.
	for _, tmpl := range []string{`{{with .}}{{$.Answer}}{{end}}`, `{{with $}}{{.Answer}}{{end}}`} {
		t.Run("the whole data "+tmpl, func(t *testing.T) {
			if got := keys(t, expectedSpec2(tmpl), metadataRow(`{"a": 1}`), metadataRow(`{"a": 2}`)); len(got) != 2 {
				t.Fatalf("%d keys for two rows whose metadata differs, want 2: %v", len(got), got)
			}
		})
	}
}

// expectedSpec2 is a verifier v that prints the answer and compares it
// with expected, a template.
func expectedSpec2(expected string) string {
	return `verifiers:
  - name: v
    command: [echo, "169"]
    expected_stdout: "` + expected + `"
components:
  - name: c
    expr: 'verifiers.v.passed ? 1.0 : 0.0'
`
}

// TestVerifierRowPlanErrors: a template field that does not exist and a
// python: that is not an interpreter are errors when the spec compiles,
// at the line and column of their key.
func TestVerifierRowPlanErrors(t *testing.T) {
	const base = `verifiers:
  - name: v
    files:
      row.json: "{{.Row}}"
    command: [cat, row.json]
    check:
      command: [python3, /check/check.py]
      files:
        check.py: "print(1)"
components:
  - name: c
    expr: 'verifiers.v.passed ? 1.0 : 0.0'
`
	fields := `the fields are .Prompt (the prompt's text), .Completion (the completion), .Answer (the reference answer), .Code (the completion's first fenced code block), .Row (the row's dataset columns as one JSON object), .Metadata (the prompt's metadata as its text)`
	for _, c := range []struct{ name, from, to, want string }{
		{"a field that does not exist", `"{{.Row}}"`, `"{{.Rows}}"`,
			`spec.yaml:4:7: verifier "v": files: file row.json reads .Rows, which is not a field; ` + fields},
		{"a field of .Row", `"{{.Row}}"`, `"{{.Row.metadata.target}}"`,
			`spec.yaml:4:7: verifier "v": files: file row.json reads .Row.metadata.target: .Row is text, with no field metadata; pass {{.Row}} to a file and parse it there`},
		{"a field in the checker's files, through $", `"print(1)"`, `"{{with .Answer}}{{$.Metadata.level}}{{end}}"`,
			`spec.yaml:9:9: verifier "v": check.files: file check.py reads .Metadata.level: .Metadata is text, with no field level; pass {{.Metadata}} to a file and parse it there`},
		{"a template that does not parse", `"{{.Row}}"`, `"{{.Row"`,
			`spec.yaml:4:7: verifier "v": files: file row.json: template: row.json:1: unclosed action`},
		{"a python: that is missing", "    command: [cat", "    python: no-such-venv\n    command: [cat",
			`spec.yaml:5:5: verifier "v": python: python no-such-venv: no such venv or interpreter; set python: to a venv directory or an interpreter's path: python interpreter not usable`},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec, err := rewards.ParseSpec("spec.yaml", []byte(strings.Replace(base, c.from, c.to, 1)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = runners.Compile(spec)
			if err == nil || err.Error() != c.want {
				t.Fatalf("Compile = %v\nwant      %s", err, c.want)
			}
			if !errors.Is(err, rewards.ErrSpec) {
				t.Fatalf("%v is not an ErrSpec", err)
			}
		})
	}
}

// TestVerifierPython: a verifier's python: is a venv both of its sandboxes
// see, read-only at /python/venv as a Python function's worker sees it,
// its bin first on PATH: python3 in the candidate's command and in the
// checker's imports the venv's packages.
func TestVerifierPython(t *testing.T) {
	needSystemPython(t)
	venv := pythontest.FakeVenv(t, systemPython)
	site := pythontest.SitePackages(t, venv, systemPython)
	if err := os.WriteFile(filepath.Join(site, "venvscore.py"), []byte("def score(text):\n    return 1.0 if text.strip() == '169' else 0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(venv, filepath.Join(dir, "venv")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "spec.yaml")
	text := `verifiers:
  - name: v
    python: venv          # relative to the spec's directory
    files:
      answer.txt: "{{.Completion}}"
    command: [python3, -c, "import sys, venvscore; print(sys.prefix); print(open('answer.txt').read())"]
    check:
      command: [python3, /check/check.py]
      files:
        check.py: |
          import os, venvscore
          prefix, answer = open("/candidate/stdout").read().split("\n", 1)
          s = venvscore.score(answer)
          open(os.environ["RLPIPE_VERDICT"], "w").write(("pass: " if s == 1.0 else "fail: ") + prefix + " " + repr(s))
components:
  - name: c
    expr: 'verifiers.v.passed ? 1.0 : 0.0'
`
	spec, err := rewards.ParseSpec(path, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := runners.Compile(spec)
	if errors.Is(err, python.ErrUnreachable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, completion string
		passed           bool
		reason           string
	}{
		{"right", "169", true, "/python/venv 1.0"},
		{"wrong", "168", false, "/python/venv 0.0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			row := metadataRow("")
			row.Trajectory.Completion = c.completion
			got := verifierOutput(t, prog, "v", row, nil)
			if got.Passed != c.passed || got.Reason != c.reason {
				t.Fatalf("verifier %+v; want passed %v, reason %q", got, c.passed, c.reason)
			}
		})
	}
}

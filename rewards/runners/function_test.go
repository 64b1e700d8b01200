package runners_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/runners"
)

const systemPython = "/usr/bin/python3"

// functionSpec weighs two Python functions of rewards/python's testdata
// beside a CEL component.
const functionSpec = `functions:
  - name: exact
    function: ../python/testdata/fns.py:exact
    python: /usr/bin/python3
    pure: true
  - name: boom
    function: ../python/testdata/fns.py:raises_on_boom
    python: /usr/bin/python3
components:
  - name: exact
    expr: functions.exact
  - name: boom
    expr: functions.boom
    weight: 0.5
  - name: short
    expr: 'num_tokens < 10 ? 1.0 : 0.0'
`

func needSystemPython(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(systemPython); err != nil {
		t.Skip(systemPython + " is not installed")
	}
}

func compileSpec(t *testing.T, src string) (*rewards.Program, error) {
	t.Helper()
	s, err := rewards.ParseSpec("spec.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return runners.Compile(s)
}

// memoTable is a Memoizer in memory that counts the calls it makes.
type memoTable struct {
	mu      sync.Mutex
	records map[string][]byte
	calls   int
}

func (m *memoTable) Memo(ctx context.Context, key any, out any, fn func(context.Context) (any, error)) error {
	k, err := json.Marshal(key)
	if err != nil {
		return err
	}
	m.mu.Lock()
	rec, ok := m.records[string(k)]
	m.mu.Unlock()
	if ok {
		return json.Unmarshal(rec, out)
	}
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
	res, err := fn(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return pipeline.Permanent(err)
	}
	m.mu.Lock()
	if m.records == nil {
		m.records = map[string][]byte{}
	}
	m.records[string(k)] = b
	m.mu.Unlock()
	return json.Unmarshal(b, out)
}

func TestPythonFunctions(t *testing.T) {
	needSystemPython(t)
	p, err := compileSpec(t, functionSpec)
	if err != nil {
		t.Fatal(err)
	}
	row := func(completion, answer string, tokens int32) rewards.Row {
		return rewards.Row{Trajectory: tables.Trajectory{PromptID: "p", Completion: completion, NumTokens: tokens, Status: tables.StatusOK},
			Prompt: tables.Prompt{PromptID: "p", Prompt: "2+2?", Answer: answer}, HasPrompt: true}
	}
	memo := &memoTable{}
	for _, c := range []struct {
		name      string
		row       rewards.Row
		status    string
		err       string
		exact     float64
		memoCalls int // the memo's calls so far: a look-up and a record per new pure row
	}{
		{"right", row("4", "4", 3), rewards.StatusOK, "", 1, 2},
		{"wrong", row("5", "4", 30), rewards.StatusOK, "", 0, 4},
		{"raises", row("boom", "4", 3), rewards.StatusError, "function boom raised ValueError: boom row", 0, 6},
		{"right again, from the memo", row("4", "4", 3), rewards.StatusOK, "", 1, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := p.Score(context.Background(), c.row, memo)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != c.status || (r.Error != nil) != (c.err != "") || r.Error != nil && *r.Error != c.err {
				t.Fatalf("got %+v (%v), want status %s, error %q", r, deref(r.Error), c.status, c.err)
			}
			if c.status == rewards.StatusOK && r.Components["exact"] != c.exact {
				t.Fatalf("exact %v, want %v", r.Components["exact"], c.exact)
			}
			if memo.calls != c.memoCalls {
				t.Fatalf("the memo made %d calls, want %d", memo.calls, c.memoCalls)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// The plan-time check: a function that does not load, or an interpreter
// that is missing, is an error at its line and column in the spec, with
// the Python traceback's last line.
func TestPythonFunctionPlanErrors(t *testing.T) {
	needSystemPython(t)
	const comps = "components:\n  - name: a\n    expr: functions.f\n"
	for _, c := range []struct{ name, src, want string }{
		{"module missing", "functions:\n  - name: f\n    function: nope_no_such_module:fn\n    python: /usr/bin/python3\n" + comps,
			`spec.yaml:3:5: function "f" (nope_no_such_module:fn): ModuleNotFoundError: No module named 'nope_no_such_module'`},
		{"function missing", "functions:\n  - name: f\n    function: ../python/testdata/fns.py:absent\n    python: /usr/bin/python3\n" + comps,
			`spec.yaml:3:5: function "f" (../python/testdata/fns.py:absent): AttributeError: module 'fns' has no attribute 'absent'`},
		{"import raises", "functions:\n  - name: f\n    function: ../python/testdata/broken.py:fn\n    python: /usr/bin/python3\n" + comps,
			`spec.yaml:3:5: function "f" (../python/testdata/broken.py:fn): RuntimeError: broken at import`},
		{"venv missing", "functions:\n  - name: f\n    function: ../python/testdata/fns.py:length\n    python: /nonexistent/venv\n" + comps,
			`spec.yaml:4:5: function "f": python /nonexistent/venv: no such venv or interpreter; set python: to a venv directory or an interpreter's path: python interpreter not usable`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := compileSpec(t, c.src)
			if !errors.Is(err, rewards.ErrSpec) || err == nil || err.Error() != c.want {
				t.Fatalf("got  %v\nwant %s", err, c.want)
			}
		})
	}
}

// ScoreFile calls a function once per scoring batch: each row's value is
// the size of the call it was in.
func TestPythonFunctionsPerBatch(t *testing.T) {
	needSystemPython(t)
	p, err := compileSpec(t, `functions:
  - {name: size, function: ../python/testdata/fns.py:batch_size, python: /usr/bin/python3}
components:
  - {name: size, expr: functions.size}
`)
	if err != nil {
		t.Fatal(err)
	}
	got, sum := scoreConcurrently(t, p, 4, 1, "4", "4", "4", "skip", "4", "4", "4", "4", "4", "4")
	// Batches of 4 rows: 0-3 (row 3 skipped), 4-7, 8-9.
	want := []float64{3, 3, 3, -1, 4, 4, 4, 4, 2, 2}
	for i, r := range got {
		if want[i] < 0 {
			if r.Status != "skipped: timeout" {
				t.Errorf("row %d: %+v", i, r)
			}
			continue
		}
		if r.Status != rewards.StatusOK || r.Components["size"] != want[i] {
			t.Errorf("row %d: %+v %s, want size %v", i, r, deref(r.Error), want[i])
		}
	}
	if sum.Scored != 9 {
		t.Errorf("summary %+v", sum)
	}
}

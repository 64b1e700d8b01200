package runs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/runs"
)

// The notebooks' helper keeps its copy of the layout between these lines:
// the one place in Python that spells a run path.
const (
	layoutBegin = "# --- layout: begin ---"
	layoutEnd   = "# --- layout: end ---"
	helper      = "notebooks/rlpipe_data.py"
)

// layoutSection splits the helper into its layout section and the rest,
// failing unless the section is there once.
func layoutSection(t *testing.T, src string) (section, rest []string) {
	t.Helper()
	in, seen := false, 0
	for _, line := range strings.Split(src, "\n") {
		switch strings.TrimSpace(line) {
		case layoutBegin:
			in, seen = true, seen+1
			continue
		case layoutEnd:
			in = false
			continue
		}
		if in {
			section = append(section, line)
		} else {
			rest = append(rest, line)
		}
	}
	if seen != 1 || in || len(section) == 0 {
		t.Fatalf("%s: want one section between %q and %q, the mirror of package runs", helper, layoutBegin, layoutEnd)
	}
	return section, rest
}

// No notebook spells a run path: its code cells read through the helper's
// readers (Run.rewards(7), Run.evals(), Run.eval_samples(8, "heldout"),
// Run.rescore_report(), …), and the helper builds every path in its layout
// section, which mirrors this package. A code cell may not spell one even
// in a comment; markdown cells, like docs, may show them.
func TestNoNotebookSpellsARunPath(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	books, err := filepath.Glob(filepath.Join(root, "notebooks", "*.ipynb"))
	if err != nil {
		t.Fatal(err)
	}
	if len(books) == 0 {
		t.Fatal("no notebooks/*.ipynb: did they move?")
	}
	for _, p := range books {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var nb struct {
			Cells []struct {
				Type   string   `json:"cell_type"`
				Source []string `json:"source"`
			} `json:"cells"`
		}
		if err := json.Unmarshal(raw, &nb); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for i, c := range nb.Cells {
			if c.Type != "code" {
				continue
			}
			for _, line := range strings.Split(strings.Join(c.Source, ""), "\n") {
				if runPath.MatchString(line) {
					found = append(found, fmt.Sprintf("notebooks/%s: cell %d: %s", filepath.Base(p), i, strings.TrimSpace(line)))
				}
			}
		}
	}
	scripts, err := filepath.Glob(filepath.Join(root, "notebooks", "*.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range scripts {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(raw), "\n")
		if rel := "notebooks/" + filepath.Base(p); rel == helper {
			_, lines = layoutSection(t, string(raw))
		}
		for _, line := range lines {
			if runPath.MatchString(line) {
				found = append(found, fmt.Sprintf("notebooks/%s: %s", filepath.Base(p), strings.TrimSpace(line)))
			}
		}
	}
	if len(found) > 0 {
		t.Errorf("%d run paths spelled in the notebooks outside the layout section of %s (read through Run's readers, which take their paths from it):\n  %s",
			len(found), helper, strings.Join(found, "\n  "))
	}
}

// The helper's layout section is this package's layout: the section is
// run alone by python3 (it needs nothing but the standard library), each
// constant and builder is called, and the answers are compared with
// this package's. A name the section adds without a case here fails too,
// so the mirror cannot grow unchecked.
func TestNotebookLayoutMirrorsRuns(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3: the notebooks' copy of the layout is not compared")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, helper))
	if err != nil {
		t.Fatal(err)
	}
	section, _ := layoutSection(t, string(raw))

	// parsed is what ParseIterationPath and ParseEvalPath answer, as the
	// Python functions do: a list, or null when the path is not one.
	parsedIteration := func(p string) any {
		if n, rest, ok := runs.ParseIterationPath(p); ok {
			return []any{n, rest}
		}
		return nil
	}
	parsedEval := func(p string) any {
		if n, set, rest, ok := runs.ParseEvalPath(p); ok {
			return []any{n, set, rest}
		}
		return nil
	}
	type call struct {
		Name string `json:"name"`
		Args []any  `json:"args"`
	}
	cases := []struct {
		call call
		want any
	}{
		{call{"CONFIG_PATH", nil}, runs.ConfigPath},
		{call{"STATE_PATH", nil}, runs.StatePath},
		{call{"ITERATIONS_PREFIX", nil}, runs.IterationsPrefix},
		{call{"EVALS_PREFIX", nil}, runs.EvalsPrefix},
		{call{"EVENTS_PREFIX", nil}, runs.EventsPrefix},
		{call{"HEALTH_REPORT_PATH", nil}, runs.HealthReportPath},
		{call{"RESCORE_REPORT_PATH", nil}, runs.RescoreReportPath},
		{call{"PROMPTS_FILE", nil}, runs.PromptsFile},
		{call{"TRAJECTORIES_FILE", nil}, runs.TrajectoriesFile},
		{call{"REWARDS_FILE", nil}, runs.RewardsFile},
		{call{"ADVANTAGES_FILE", nil}, runs.AdvantagesFile},
		{call{"HEALTH_FILE", nil}, runs.HealthFile},
		{call{"TRAIN_METRICS_FILE", nil}, runs.TrainMetricsFile},
		{call{"ADAPTER_DIR", nil}, runs.AdapterDir},
		{call{"SAMPLES_FILE", nil}, runs.SamplesFile},
		{call{"SUMMARY_FILE", nil}, runs.SummaryFile},
		{call{"iteration_dir", []any{7}}, runs.IterationDir(7)},
		{call{"iteration_dir", []any{1234567}}, runs.IterationDir(1234567)},
		{call{"iteration_path", []any{7, runs.RewardsFile}}, runs.IterationPath(7, runs.RewardsFile)},
		{call{"eval_dir", []any{0, "heldout"}}, runs.EvalDir(0, "heldout")},
		{call{"eval_path", []any{12, "heldout", runs.SamplesFile}}, runs.EvalPath(12, "heldout", runs.SamplesFile)},
		{call{"events_path", []any{7}}, runs.EventsPath(7)},
		{call{"metrics_path", []any{7}}, runs.MetricsPath(7)},
	}
	for _, p := range []string{
		runs.IterationPath(7, runs.RewardsFile), runs.AdapterPath(7) + "/" + runs.AdapterConfigFile, runs.IterationDir(7),
		runs.IterationDir(1234567) + "/x", runs.IterationsPrefix + "7/x", runs.IterationsPrefix + "00000a/x", runs.IterationsPrefix,
		runs.EvalPath(4, "heldout", runs.SummaryFile), runs.RescoreReportPath,
	} {
		cases = append(cases, struct {
			call call
			want any
		}{call{"parse_iteration_path", []any{p}}, parsedIteration(p)})
	}
	for _, p := range []string{
		runs.EvalPath(4, "heldout", runs.SummaryFile), runs.EvalDir(0, "heldout"), runs.EvalsPrefix + "000004/",
		runs.EvalsPrefix + "4/heldout/x", runs.EvalsPrefix + "000004", runs.EvalDir(4, "a") + "/b/c", runs.IterationPath(7, runs.RewardsFile),
	} {
		cases = append(cases, struct {
			call call
			want any
		}{call{"parse_eval_path", []any{p}}, parsedEval(p)})
	}
	calls := make([]call, len(cases))
	for i, c := range cases {
		calls[i] = c.call
	}
	in, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	// The driver runs the section in a namespace of its own, answers each
	// call, and lists the section's public names.
	const driver = `import json, sys
ns = {}
exec(open(sys.argv[1]).read(), ns)
calls = json.loads(sys.argv[2])
out = [ns[c["name"]](*c["args"]) if callable(ns[c["name"]]) else ns[c["name"]] for c in calls]
names = sorted(k for k in ns if not k.startswith("_"))
print(json.dumps({"answers": out, "names": names}))`
	file := filepath.Join(t.TempDir(), "layout.py")
	if err := os.WriteFile(file, []byte(strings.Join(section, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", driver, file, string(in))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 on the layout section of %s: %v\n%s", helper, err, stderr.Bytes())
	}
	var got struct {
		Answers []any    `json:"answers"`
		Names   []string `json:"names"`
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got.Answers) != len(cases) {
		t.Fatalf("python3 answered %s (%v), want %d answers", out, err, len(cases))
	}
	checked := map[string]bool{}
	for i, c := range cases {
		checked[c.call.Name] = true
		// Compare as JSON values, the way both sides wrote them.
		wantJSON, err := json.Marshal(c.want)
		if err != nil {
			t.Fatal(err)
		}
		var want any
		if err := json.Unmarshal(wantJSON, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Answers[i], want) {
			t.Errorf("%s%v in %s is %v; package runs says %v", c.call.Name, c.call.Args, helper, got.Answers[i], want)
		}
	}
	for _, n := range got.Names {
		if !checked[n] {
			t.Errorf("%s's layout section defines %s, which this test does not compare with package runs: add a case", helper, n)
		}
	}
}

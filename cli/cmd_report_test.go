package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// report runs `rlpipe --store STORE report args...` on a command tree
// holding the report command (until root.go registers it, the harness's
// tree does not).
func (h *harness) report(args ...string) (string, error) {
	h.t.Helper()
	var out, errb bytes.Buffer
	o := &rootOptions{env: environ{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}, logger: zerolog.Nop()}
	root := &cobra.Command{Use: "rlpipe", SilenceErrors: true, SilenceUsage: true,
		PersistentPreRunE: func(*cobra.Command, []string) error { return o.validate() }}
	o.AddFlags(root.PersistentFlags())
	root.AddCommand(newReportCommand(o))
	root.SetArgs(append([]string{"--store", h.store, "report"}, args...))
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestReportCommand(t *testing.T) {
	h, cfg := newRunHarness(t, "1ms")
	h.ok("run", "-f", cfg)

	// Text: the path of the page (report-<run>.html by default, here
	// relative to the test's working directory, so give --out).
	page := filepath.Join(h.dir, "standin.html")
	out, err := h.report("standin", "--out", page)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != page {
		t.Fatalf("output %q, want the path %s", out, page)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"3 iterations (1–3)", "No evaluations yet", "<svg"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("page lacks %q", want)
		}
	}

	// JSON, with a comparison against a rescoring of the run.
	spec := h.file("fixed.yaml", "components:\n  - name: correct\n    expr: 'num_equal(extract_answer(completion), answer, 1e-9) ? 1.0 : 0.0'\n    weight: 1.0\n")
	h.ok("rescore", "--from", "runs-standin", "--reward", spec, "--branch", "try-fixed")
	out, err = h.report("standin", "--out", page, "--compare", "try-fixed", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep reportOut
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Ref != "runs-standin" || rep.Path != page || rep.Iterations != 3 || len(rep.Evals) != 0 || rep.Alarms == nil || rep.Compare != "try-fixed" || len(rep.Commit) != 64 {
		t.Fatalf("json = %+v", rep)
	}
	if b, _ := os.ReadFile(page); !bytes.Contains(b, []byte("Comparison: try-fixed (new) against runs-standin (old)")) {
		t.Fatalf("page lacks the comparison")
	}

	// A ref that is not a run branch works too; a missing run is an error.
	if _, err := h.report("try-fixed", "--out", filepath.Join(h.dir, "x.html")); err != nil {
		t.Fatalf("report on the rescore branch: %v", err)
	}
	if _, err := h.report("nope", "--out", filepath.Join(h.dir, "y.html")); err == nil || !strings.Contains(err.Error(), "no run nope") {
		t.Fatalf("missing run: %v", err)
	}

	// The helper the run command calls after each iteration.
	st := h.openStore()
	checkHealthInputs(t, st, "runs-standin", 3)
	refreshed := filepath.Join(h.dir, "live.html")
	if err := writeRunReport(context.Background(), st, "standin", refreshed, nil); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(refreshed); err != nil || fi.Size() == 0 {
		t.Fatalf("refreshed report: %v", err)
	}
}

// checkHealthInputs: the health row the loop committed with each of
// iterations 1..n of ref records the SHA-256 of the tables and metrics
// it was computed from (docs/REPORTS.md), and these are the checksums
// the store lists for the committed files: the report reads the row in
// place of the tables.
func checkHealthInputs(t *testing.T, st artifacts.Store, ref string, n int) {
	t.Helper()
	ctx := context.Background()
	for it := 1; it <= n; it++ {
		listed := map[string]string{}
		for e, err := range st.ListObjects(ctx, ref, &artifacts.ListOptions{Prefix: runs.IterationDir(it) + "/"}) {
			if err != nil {
				t.Fatal(err)
			}
			listed[path.Base(e.Path)] = e.Checksum
		}
		hp := runs.IterationPath(it, runs.HealthFile)
		b, err := artifacts.ReadObject(ctx, st, ref, hp)
		if err != nil || b == nil {
			t.Fatalf("%s: %v", hp, err)
		}
		f, err := tables.OpenFile(bytes.NewReader(b), int64(len(b)), hp, nil)
		if err != nil {
			t.Fatal(err)
		}
		for input, file := range map[string]string{"trajectories": runs.TrajectoriesFile, "rewards": runs.RewardsFile, "metrics": runs.TrainMetricsFile} {
			got, ok := f.Metadata("rlpipe.health.from." + input)
			if !ok || got != listed[file] || (input != "metrics" && got == "") {
				t.Errorf("%s records %s %q (present %v), the store lists %s %q", hp, input, got, ok, file, listed[file])
			}
		}
	}
}

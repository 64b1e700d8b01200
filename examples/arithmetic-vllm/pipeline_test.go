// Package arithmeticvllm holds the test of the arithmetic pipeline sampled
// by a real vLLM: see pipeline.yaml and README.md.
package arithmeticvllm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/cli"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/policy/vllmserver"
	"github.com/rlpipe/rlpipe/policy/vllmserver/vllmtest"
)

// pipeline.yaml as shipped, cut to 16 iterations, against vLLM serving the
// exported tiny-arith on a free loopback port: every iteration samples
// from the previous iteration's adapter hot-loaded into vLLM, with the
// token ids and logprobs vLLM returned, the embedded trainer trains on
// them, and held-out pass@1 rises. Skipped without a venv with vLLM.
func TestPipelineWithVLLM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts vLLM and trains for 16 iterations")
	}
	py := vllmtest.Python(t)
	model := vllmtest.Export(t, "tiny-arith")
	srv := vllmtest.Start(t, vllmserver.Options{Python: py, Model: model, Name: "tiny-arith"})

	b, err := os.ReadFile("pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := filepath.Abs("../arithmetic/reward.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	for old, new := range map[string]string{
		"http://127.0.0.1:8011":           srv.URL(),
		"spec: ../arithmetic/reward.yaml": "spec: " + spec,
		"iterations: 20":                  "iterations: 16",
		"every: 5":                        "every: 16",
		"n: 16":                           "n: 8",
		"k: [1, 4, 16]":                   "k: [1, 8]",
	} {
		if !strings.Contains(src, old) {
			t.Fatalf("pipeline.yaml no longer has %q; update this test", old)
		}
		src = strings.Replace(src, old, new, 1)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "store")
	rlpipe := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := cli.Main(append([]string{"--store", store}, args...), strings.NewReader(""), &out, &errb); code != 0 {
			t.Fatalf("rlpipe %s: exit %d\n%s\nvLLM's log ends:\n%s", strings.Join(args, " "), code, errb.String(), srv.LogTail())
		}
		return out.String()
	}
	rlpipe("init-store")
	rlpipe("dataset", "arith", "main", "--train", "1024", "--heldout", "200")
	rlpipe("run", "-f", cfg, "--no-report")

	var st struct {
		Evals []struct {
			Checkpoint string             `json:"checkpoint"`
			Iteration  int                `json:"iteration"`
			Metrics    map[string]float64 `json:"metrics"`
		} `json:"evals"`
	}
	if err := json.Unmarshal([]byte(rlpipe("status", "arith-vllm", "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Evals) != 2 || st.Evals[0].Checkpoint != "base" || st.Evals[1].Iteration != 16 {
		t.Fatalf("evals %+v: want the base model, then iteration 16", st.Evals)
	}
	base, last := st.Evals[0].Metrics["pass@1"], st.Evals[1].Metrics["pass@1"]
	t.Logf("held-out pass@1 sampled by vLLM: base %.4f, iteration 16 %.4f (%+.2f points); pass@8 %.4f → %.4f",
		base, last, 100*(last-base), st.Evals[0].Metrics["pass@8"], st.Evals[1].Metrics["pass@8"])
	if last <= base+0.02 {
		t.Errorf("held-out pass@1 went from %.4f to %.4f: training should raise it by more than 2 points", base, last)
	}

	// With overlap (max_staleness 1) iteration N samples from the adapter
	// of iteration N-2: the first two from the base, every later one from
	// a new adapter through vLLM, each sample with the ids and logprobs
	// vLLM returned.
	ctx := context.Background()
	s, err := artifacts.Open(ctx, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	versions := map[string]bool{}
	for it := 1; it <= 16; it++ {
		rows := readTrajectories(t, s, it)
		for _, r := range rows {
			if r.Status != tables.StatusOK || len(r.TokenIDs) == 0 || len(r.Logprobs) != len(r.TokenIDs) {
				t.Fatalf("iteration %d sample %s/%d: status %s, %d token ids, %d logprobs", it, r.PromptID, r.SampleIndex, r.Status, len(r.TokenIDs), len(r.Logprobs))
			}
		}
		v := rows[0].PolicyVersion
		if it > 2 && (!strings.HasPrefix(v, "tiny-arith+adapter-") || versions[v]) {
			t.Errorf("iteration %d sampled from %q: want a new adapter each iteration", it, v)
		}
		versions[v] = true
	}
	// What vLLM sampled is what the embedded engine would score: the
	// logprobs vLLM returned for its own tokens, from the base
	// (iteration 1) and from an adapter the embedded trainer wrote
	// (iteration 16 samples iteration 14's), against the Go model's on the
	// same token ids.
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ sampled, adapter int }{{1, 0}, {16, 14}} {
		var a *tiny.Adapter
		if c.adapter > 0 {
			if a, err = m.LoadAdapter(fetchAdapter(t, s, c.adapter)); err != nil {
				t.Fatal(err)
			}
		}
		worst := maxLogprobGap(t, m, a, readTable(t, s, c.sampled, "prompts.parquet", tables.Prompts), readTrajectories(t, s, c.sampled))
		t.Logf("iteration %d: vLLM's logprobs and the embedded model's on the same %s tokens differ by at most %.2g", c.sampled,
			map[bool]string{true: "base", false: fmt.Sprintf("iteration-%d-adapter", c.adapter)}[a == nil], worst)
		if worst > 1e-4 {
			t.Errorf("iteration %d: vLLM's and the embedded model's logprobs differ by %.3g, want ≤ 1e-4", c.sampled, worst)
		}
	}

	// Old adapters were unloaded: vLLM holds the base and at most the
	// three newest.
	resp, err := http.Get(srv.URL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&models); err != nil {
		t.Fatal(err)
	}
	if n := len(models.Data); n < 2 || n > 4 {
		t.Errorf("vLLM serves %d models (%+v): want the base and 1 to 3 adapters", n, models.Data)
	}
}

// maxLogprobGap scores every sample's token ids with the embedded model
// (and adapter a) after its prompt's tokens and returns the largest gap to
// the logprobs vLLM returned with them.
func maxLogprobGap(t *testing.T, m *tiny.Model, a *tiny.Adapter, prompts []tables.Prompt, rows []tables.Trajectory) float64 {
	t.Helper()
	text := map[string]string{}
	for _, p := range prompts {
		text[p.PromptID] = p.Prompt
	}
	var batch []tiny.Example
	for _, r := range rows {
		ids, err := m.Tokenize(text[r.PromptID])
		if err != nil {
			t.Fatalf("prompt %s: %v", r.PromptID, err)
		}
		batch = append(batch, tiny.Example{Prompt: ids, Completion: r.TokenIDs})
	}
	got, _, err := m.Score(context.Background(), a, batch)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i, r := range rows {
		for j, lp := range r.Logprobs {
			worst = max(worst, math.Abs(float64(got[i][j]-lp)))
		}
	}
	return worst
}

// fetchAdapter copies iteration it's committed adapter out of the store
// into a PEFT directory.
func fetchAdapter(t *testing.T, s artifacts.Store, it int) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"adapter_config.json", "adapter_model.safetensors"} {
		path := findObject(t, s, it, "adapter/"+name)
		if err := os.WriteFile(filepath.Join(dir, name), readObject(t, s, path), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func readTrajectories(t *testing.T, s artifacts.Store, it int) []tables.Trajectory {
	t.Helper()
	return readTable(t, s, it, "trajectories.parquet", tables.Trajectories)
}

// readTable reads the table of iteration it whose path ends with name.
func readTable[R any](t *testing.T, s artifacts.Store, it int, name string, table *tables.Table[R]) []R {
	t.Helper()
	f := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(f, readObject(t, s, findObject(t, s, it, name)), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, err := tables.ReadFile(f, table)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// findObject returns the path of iteration it's object ending with /name.
func findObject(t *testing.T, s artifacts.Store, it int, name string) string {
	t.Helper()
	prefix := "iterations/" + pad(it) + "/"
	for e, err := range s.ListObjects(context.Background(), "runs-arith-vllm", &artifacts.ListOptions{Prefix: prefix}) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(e.Path, "/"+name) {
			return e.Path
		}
	}
	t.Fatalf("no %s under %s", name, prefix)
	return ""
}

func readObject(t *testing.T, s artifacts.Store, path string) []byte {
	t.Helper()
	rc, _, err := s.GetObject(context.Background(), "runs-arith-vllm", path)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(rc); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func pad(n int) string { return fmt.Sprintf("%06d", n) }

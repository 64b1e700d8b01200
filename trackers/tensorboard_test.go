package trackers_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/trackers"
	"github.com/rlpipe/rlpipe/trackers/trackertest"
)

// tensorBoardRead is what TensorBoard's EventAccumulator reads in a run
// directory.
type tensorBoardRead struct {
	Scalars map[string][][3]float64 `json:"scalars"` // step, value, wall time
	Texts   map[string][][2]any     `json:"texts"`   // step, text
}

func readTensorBoard(t *testing.T, dir string) tensorBoardRead {
	t.Helper()
	out, err := exec.Command(trackertest.Python(t), "testdata/read_tensorboard.py", dir).Output()
	if err != nil {
		var ee *exec.ExitError
		if ok := errorAs(err, &ee); ok {
			t.Fatalf("read_tensorboard.py: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("read_tensorboard.py: %v", err)
	}
	var r tensorBoardRead
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("read_tensorboard.py printed %q: %v", out, err)
	}
	return r
}

func errorAs(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

// tbPoints are values float32 cannot hold exactly, negative, tiny and
// large, over steps 0..2, with a commit each.
func tbPoints() []trackers.Point {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	return []trackers.Point{
		{Step: 0, Time: t0, Scalars: map[string]float64{"eval/heldout/pass@1": 0.1, "eval/heldout/pass@1/low": 1.0 / 3, "eval/heldout/pass@1/high": 0.7}, Text: map[string]string{"commit": "c0"}},
		{Step: 1, Time: t0.Add(time.Minute), Scalars: map[string]float64{"train/loss": -2.5e-7, "reward/total": 12345.678, "reward/correct": 0.25}, Text: map[string]string{"commit": "c1"}},
		{Step: 2, Time: t0.Add(2 * time.Minute), Scalars: map[string]float64{"train/loss": 3.4028234663852886e+38, "reward/total": -1e-30, "reward/correct": 0.5}, Text: map[string]string{"commit": "c2"}},
	}
}

func writeTensorBoard(t *testing.T, dir string, run trackers.Run, points []trackers.Point) string {
	t.Helper()
	tr, err := trackers.Open(trackers.TensorBoardBackend, &trackers.TensorBoardOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := tr.Start(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := tr.Log(ctx, points); err != nil {
		t.Fatal(err)
	}
	if err := tr.End(ctx, trackers.Outcome{Status: trackers.Finished}); err != nil {
		t.Fatal(err)
	}
	return tr.(*trackers.TensorBoard).Path()
}

// TestTensorBoardReadBack writes points and reads them back with
// TensorBoard's own EventAccumulator: every scalar at its step with the
// exact float32 value and the commit's time, every commit as text, and
// the config.
func TestTensorBoardReadBack(t *testing.T) {
	dir := t.TempDir()
	run := trackers.Run{Name: "arith", Config: []byte("run: arith\niterations: 2\n")}
	points := tbPoints()
	writeTensorBoard(t, dir, run, points)
	got := readTensorBoard(t, filepath.Join(dir, "arith"))

	want := map[string][][3]float64{}
	for _, p := range points {
		for tag, v := range p.Scalars {
			want[tag] = append(want[tag], [3]float64{float64(p.Step), float64(float32(v)), float64(p.Time.UnixNano()) / 1e9})
		}
	}
	if len(got.Scalars) != len(want) {
		t.Errorf("tags: got %d, want %d: %v", len(got.Scalars), len(want), got.Scalars)
	}
	for tag, w := range want {
		g := got.Scalars[tag]
		if !slices.Equal(g, w) {
			t.Errorf("%s: got %v, want %v", tag, g, w)
		}
	}
	var commits []string
	for _, e := range got.Texts["commit"] {
		commits = append(commits, e[1].(string))
		if e[0].(float64) != float64(len(commits)-1) {
			t.Errorf("commit %v: want step %d", e, len(commits)-1)
		}
	}
	if !slices.Equal(commits, []string{"c0", "c1", "c2"}) {
		t.Errorf("commits: got %v", commits)
	}
	if cfg := got.Texts["config"]; len(cfg) != 1 || !strings.Contains(cfg[0][1].(string), "    iterations: 2") {
		t.Errorf("config: got %v", cfg)
	}
}

// TestTensorBoardBackfillReplaces writes a live run that lost its last
// step, then a back-fill of all of it in a second file: TensorBoard's
// reader shows each step's scalars once. (Its EventAccumulator purges
// scalars at a restart, not tensors: the texts of the first file stay,
// and the back-fill's follow them.)
func TestTensorBoardBackfillReplaces(t *testing.T) {
	dir := t.TempDir()
	run := trackers.Run{Name: "arith"}
	points := tbPoints()
	writeTensorBoard(t, dir, run, points[:2])
	writeTensorBoard(t, dir, run, points)
	got := readTensorBoard(t, filepath.Join(dir, "arith"))
	if g := got.Scalars["train/loss"]; len(g) != 2 || g[0][0] != 1 || g[1][0] != 2 {
		t.Errorf("train/loss: got %v, want steps 1 and 2 once", g)
	}
	if g := got.Texts["commit"]; len(g) < 3 || g[len(g)-1][1] != "c2" {
		t.Errorf("commits: got %v, want the back-fill's c0, c1, c2 last", g)
	}
}

// TestTensorBoardDeterministic writes the same points twice: the files
// differ only in the first event's wall time.
func TestTensorBoardDeterministic(t *testing.T) {
	run := trackers.Run{Name: "r", Config: []byte("a: 1\n")}
	a, err := os.ReadFile(writeTensorBoard(t, t.TempDir(), run, tbPoints()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(writeTensorBoard(t, t.TempDir(), run, tbPoints()))
	if err != nil {
		t.Fatal(err)
	}
	// The first two records (the file version, the config) hold the time
	// of Start; a record is 8 + 4 + len + 4 bytes.
	skip := 0
	for range 2 {
		skip += 16 + int(binary.LittleEndian.Uint64(a[skip:]))
	}
	if !bytes.Equal(a[skip:], b[skip:]) {
		t.Error("the points' events differ between two writes of the same points")
	}
	if len(a) != len(b) {
		t.Errorf("sizes differ: %d and %d", len(a), len(b))
	}
}

func TestTensorBoardUnwritableDir(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := trackers.Open(trackers.TensorBoardBackend, &trackers.TensorBoardOptions{Dir: blocker})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(context.Background(), trackers.Run{Name: "r"}); err == nil || !strings.Contains(err.Error(), "tensorboard:") {
		t.Errorf("Start under a file: got %v, want a tensorboard error", err)
	}
}

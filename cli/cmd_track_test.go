package cli

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrack runs a pipeline whose tracking section writes TensorBoard
// files, then back-fills the run into another directory: the points'
// events are the same bytes, so the back-fill is what the live run sent.
func TestTrack(t *testing.T) {
	h, _ := newRunHarness(t, "1ms")
	cfg := h.file("tracked.yaml", examplePipeline(t, "1ms")+"tracking: [{kind: tensorboard, dir: tb}]\n")
	h.ok("run", "-f", cfg)
	live := eventFiles(t, filepath.Join(h.dir, "tb", "standin"))
	if len(live) != 1 {
		t.Fatalf("live event files: %v", live)
	}

	var out []trackOut
	back := filepath.Join(h.dir, "back")
	h.json(&out, "track", "standin", "--to", "tensorboard:"+back)
	if len(out) != 1 || out[0].Tracker != "tensorboard:"+back || out[0].Points != 3 {
		t.Fatalf("track: %+v", out)
	}
	filled := eventFiles(t, filepath.Join(back, "standin"))
	a, b := []byte(readFile(t, live[0])), []byte(readFile(t, filled[0]))
	if !bytes.Equal(afterStart(t, a), afterStart(t, b)) || len(afterStart(t, a)) == 0 {
		t.Error("the back-fill's points differ from the live run's")
	}
	for _, f := range [][]byte{a, b} {
		if bytes.Contains(f, []byte("hunter2")) || !bytes.Contains(f, []byte("<redacted>")) {
			t.Error("an event file holds the secret, or not the redacted config")
		}
	}

	// Without --to, the run's own tracking section: a second file there.
	if got := h.ok("track", "standin"); !strings.Contains(got, "tensorboard:"+filepath.Join(h.dir, "tb")+": 3 points of run standin") {
		t.Errorf("track without --to:\n%s", got)
	}
	if n := len(eventFiles(t, filepath.Join(h.dir, "tb", "standin"))); n != 2 {
		t.Errorf("%d event files after the back-fill, want 2", n)
	}

	h.fails(2, []string{`unknown tracker kind "wandb"`}, "track", "standin", "--to", "wandb:x")
	h.fails(2, []string{"write KIND:TARGET"}, "track", "standin", "--to", "tensorboard")
	h.fails(2, []string{"missing RUN"}, "track")
	h.fails(1, []string{`no run "nope"`}, "track", "nope", "--to", "tensorboard:x")
}

func eventFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// afterStart is an event file without its first two records (the file
// version and the config, which hold the time the file was made).
func afterStart(t *testing.T, b []byte) []byte {
	t.Helper()
	at := 0
	for range 2 {
		if len(b) < at+8 {
			t.Fatalf("event file of %d bytes", len(b))
		}
		at += 16 + int(binary.LittleEndian.Uint64(b[at:]))
	}
	return b[at:]
}

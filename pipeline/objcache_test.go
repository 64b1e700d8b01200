package pipeline

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func writeTemp(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// An output linked into the cache comes back as a copy: an attempt that
// changes its input file does not change the cache, and the output's
// work directory can go.
func TestObjectCacheHandsOutCopies(t *testing.T) {
	parent, work := t.TempDir(), t.TempDir()
	c := newObjectCache(parent)
	defer c.close()
	out := writeTemp(t, work, "adapter.safetensors", "weights v1")
	c.add("sum-1", out, true)
	if err := os.RemoveAll(work); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(t.TempDir(), "in", "policy", "adapter.safetensors")
	if !c.get("sum-1", in) {
		t.Fatal("the output put under sum-1 is not in the cache")
	}
	if got := readString(t, in); got != "weights v1" {
		t.Fatalf("cached copy %q", got)
	}
	if err := os.WriteFile(in, []byte("changed by the task"), 0o644); err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(t.TempDir(), "again")
	if !c.get("sum-1", again) || readString(t, again) != "weights v1" {
		t.Fatalf("a task that changed its input changed the cache")
	}
	if c.get("sum-2", filepath.Join(t.TempDir(), "x")) || c.get("", filepath.Join(t.TempDir(), "y")) {
		t.Fatal("a checksum never added, or none, is a hit")
	}
}

// A linked output that something changes after it was put (a process its
// task left behind) no longer matches what was recorded: a miss, and the
// entry is gone.
func TestObjectCacheDropsAChangedOutput(t *testing.T) {
	c := newObjectCache(t.TempDir())
	defer c.close()
	out := writeTemp(t, t.TempDir(), "rows.parquet", "rows")
	c.add("sum", out, true)
	later := time.Now().Add(time.Minute)
	if err := os.WriteFile(out, []byte("rows, and more"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(out, later, later)
	if c.get("sum", filepath.Join(t.TempDir(), "in")) {
		t.Fatal("an output changed after it was put came from the cache")
	}
	if len(c.entries) != 0 || c.size != 0 {
		t.Fatalf("the changed entry is still counted: %d entries, %d bytes", len(c.entries), c.size)
	}
}

// The least recently used objects go past the cap; an object larger than
// a quarter of it is not kept; close removes the files.
func TestObjectCacheEvicts(t *testing.T) {
	c := newObjectCache(t.TempDir())
	c.max = 40
	src := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		c.add(n, writeTemp(t, src, n, "0123456789"), false)
	}
	if !c.get("a", filepath.Join(t.TempDir(), "a")) { // a is now the most recent
		t.Fatal("a is missing")
	}
	c.add("d", writeTemp(t, src, "d", "0123456789"), false)
	c.add("e", writeTemp(t, src, "e", "0123456789"), false)
	for sum, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true, "e": true} {
		if got := c.get(sum, filepath.Join(t.TempDir(), sum)); got != want {
			t.Errorf("object %s in the cache: %v, want %v", sum, got, want)
		}
	}
	c.add("big", writeTemp(t, src, "big", "01234567890"), false)
	if c.get("big", filepath.Join(t.TempDir(), "big")) {
		t.Error("an object over a quarter of the cap was kept")
	}
	dir := c.dir.Path()
	c.close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("close left %s (%v)", dir, err)
	}
	if c.get("a", filepath.Join(t.TempDir(), "a")) {
		t.Fatal("a closed cache still hands out objects")
	}
}

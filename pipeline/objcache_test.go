package pipeline

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

func stat(t *testing.T, p string) os.FileInfo {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
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
	c.add("sum-1", out, stat(t, out))
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
// entry is gone. One changed between its put and the link is not kept.
func TestObjectCacheDropsAChangedOutput(t *testing.T) {
	c := newObjectCache(t.TempDir())
	defer c.close()
	out := writeTemp(t, t.TempDir(), "rows.parquet", "rows")
	c.add("sum", out, stat(t, out))
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
	late := writeTemp(t, t.TempDir(), "late.parquet", "as put")
	before := stat(t, late)
	if err := os.WriteFile(late, []byte("written after the put"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.add("late", late, before)
	if c.get("late", filepath.Join(t.TempDir(), "in")) {
		t.Fatal("an output changed between its put and the link went into the cache")
	}
}

// Only SHA-256 checksums are hashed on the way in, and a closed cache
// takes nothing: an add racing close leaves no directory behind.
func TestObjectCacheWantsAndClose(t *testing.T) {
	parent := t.TempDir()
	c := newObjectCache(parent)
	sha := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	if c.wants(sha) != objectCacheBytes/4 || c.wants("d41d8cd98f00b204e9800998ecf8427e") != 0 || c.wants("") != 0 || c.wants(strings.Repeat("z", 64)) != 0 {
		t.Fatal("wants: a SHA-256 hex checksum, and nothing else")
	}
	src := t.TempDir()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := writeTemp(t, src, strconv.Itoa(i), "bytes "+strconv.Itoa(i))
			c.add(strconv.Itoa(i), f, nil)
			c.get(strconv.Itoa(i), filepath.Join(t.TempDir(), "out"))
		}()
	}
	c.close()
	wg.Wait()
	c.add("after", writeTemp(t, src, "after", "late"), nil)
	if c.wants(sha) != 0 || c.get("after", filepath.Join(t.TempDir(), "after")) {
		t.Fatal("a closed cache still takes or hands out objects")
	}
	left, _ := filepath.Glob(filepath.Join(parent, "*"))
	if len(left) != 0 {
		t.Fatalf("a closed cache left %v", left)
	}
}

// The least recently used objects go past the cap; an object larger than
// a quarter of it is not kept; close removes the files.
func TestObjectCacheEvicts(t *testing.T) {
	c := newObjectCache(t.TempDir())
	c.max = 40
	src := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		c.add(n, writeTemp(t, src, n, "0123456789"), nil)
	}
	if !c.get("a", filepath.Join(t.TempDir(), "a")) { // a is now the most recent
		t.Fatal("a is missing")
	}
	c.add("d", writeTemp(t, src, "d", "0123456789"), nil)
	c.add("e", writeTemp(t, src, "e", "0123456789"), nil)
	for sum, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true, "e": true} {
		if got := c.get(sum, filepath.Join(t.TempDir(), sum)); got != want {
			t.Errorf("object %s in the cache: %v, want %v", sum, got, want)
		}
	}
	c.add("big", writeTemp(t, src, "big", "01234567890"), nil)
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

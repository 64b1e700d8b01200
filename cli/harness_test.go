package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/internal/configtest"
)

// harness runs the rlpipe command in-process against a store in a
// temporary directory.
type harness struct {
	t     testing.TB
	dir   string // scratch directory for local files
	store string
	env   map[string]string
	stdin string
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	dir := t.TempDir()
	return &harness{t: t, dir: dir, store: filepath.Join(dir, "store"), env: map[string]string{}}
}

// newStore is a harness with an initialised store.
func newStore(t testing.TB) *harness {
	t.Helper()
	h := newHarness(t)
	h.ok("init-store")
	return h
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs `rlpipe --store STORE args...`.
func (h *harness) run(args ...string) result {
	h.t.Helper()
	return h.runRaw(append([]string{"--store", h.store}, args...)...)
}

// runRaw runs rlpipe with exactly args.
func (h *harness) runRaw(args ...string) result {
	h.t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, environ{
		stdin:  strings.NewReader(h.stdin),
		stdout: &out,
		stderr: &errb,
		getenv: func(k string) string { return h.env[k] },
	})
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// ok runs a command that must succeed and returns its stdout.
func (h *harness) ok(args ...string) string {
	h.t.Helper()
	r := h.run(args...)
	if r.code != ExitOK {
		h.t.Fatalf("rlpipe %s: exit %d\nstderr: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// json runs a command with -o json and decodes its output into v.
func (h *harness) json(v any, args ...string) {
	h.t.Helper()
	out := h.ok(append(args, "-o", "json")...)
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		h.t.Fatalf("rlpipe %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// fails runs a command that must fail with code and a stderr holding
// every want string; it returns stderr.
func (h *harness) fails(code int, want []string, args ...string) string {
	h.t.Helper()
	r := h.run(args...)
	if r.code != code {
		h.t.Fatalf("rlpipe %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			h.t.Errorf("rlpipe %s: stderr lacks %q:\n%s", strings.Join(args, " "), w, r.stderr)
		}
	}
	return r.stderr
}

// file writes a local file in the scratch directory and returns its path.
func (h *harness) file(name, content string) string {
	h.t.Helper()
	p := filepath.Join(h.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
	return p
}

// promptsJSONL builds JSONL prompt rows p0001, p0002, … asking for a+b.
func promptsJSONL(rows ...[2]int) string {
	var b strings.Builder
	for i, r := range rows {
		fmt.Fprintf(&b, "{\"prompt_id\":\"p%04d\",\"prompt\":\"%d+%d=\",\"answer\":\"%d\"}\n", i+1, r[0], r[1], r[0]+r[1])
	}
	return b.String()
}

// openStore opens the harness's store directly, for a test that calls a
// store function or serves the store itself; it is closed when the test
// ends.
func (h *harness) openStore() *local.Store {
	h.t.Helper()
	st, err := local.Open(context.Background(), h.store, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { st.Close() })
	return st
}

// newLocalStore is an empty embedded store (init-store's) opened
// directly; it is closed when the test ends.
func newLocalStore(t testing.TB) *local.Store {
	t.Helper()
	return newStore(t).openStore()
}

// readFile reads a file (a path relative to cli/) or fails the test.
func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// arithExample is examples/arithmetic/pipeline.yaml with its reward spec
// named by absolute path and edits applied (see configtest.Edit).
func arithExample(t testing.TB, edits map[string]string) string {
	t.Helper()
	src := readFile(t, "../examples/arithmetic/pipeline.yaml")
	src = configtest.Edit(t, "the example", src, map[string]string{"spec: reward.yaml": "spec: " + configtest.Abs(t, "../examples/arithmetic/reward.yaml")})
	return configtest.Edit(t, "the example", src, edits)
}

// serving runs serve in the background until the test calls stop: serve
// prints a first line that holds its URL as the field'th word (from 0)
// and then serves until its context ends. stop fails the test unless
// serve then returns nil.
func serving(t *testing.T, field int, serve func(ctx context.Context, p printer) error) (url string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, printer{w: pw})
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	return strings.Fields(line)[field], func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("serve after cancel: %v", err)
		}
	}
}

// sameLines fails the test unless got and want, each joined with sep, are
// the same text; the message shows both, under what.
func sameLines(t testing.TB, what string, got, want []string, sep string) {
	t.Helper()
	if g, w := strings.Join(got, sep), strings.Join(want, sep); g != w {
		t.Fatalf("%s:\n%s\nwant:\n%s", what, g, w)
	}
}

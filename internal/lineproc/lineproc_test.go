package lineproc_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/rlpipe/rlpipe/internal/lineproc"
)

// ReadLine returns the line, the read's error at the end of the input,
// and, once the context has ended, calls kill (here: closing the pipe's
// writer, as killing a worker closes its stdout) and returns ErrGaveUp
// wrapping the context's error.
func TestReadLine(t *testing.T) {
	for _, c := range []struct {
		name    string
		written string
		close   bool // the writer closes: the worker exited
		cancel  bool // the context has ended
		want    string
		err     error
		killed  bool
	}{
		{name: "a line", written: "{\"ok\": true}\n", want: "{\"ok\": true}\n"},
		{name: "exited", written: "partial", close: true, want: "partial", err: io.EOF},
		{name: "gave up", cancel: true, err: context.Canceled, killed: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			defer w.Close()
			if _, err := w.WriteString(c.written); err != nil {
				t.Fatal(err)
			}
			if c.close {
				w.Close()
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.cancel {
				cancel()
			}
			killed := false
			got, err := lineproc.ReadLine(ctx, bufio.NewReader(r), func() { killed = true; w.Close() })
			if string(got) != c.want || !errors.Is(err, c.err) || killed != c.killed {
				t.Errorf("ReadLine: %q, %v, killed %v; want %q, %v, killed %v", got, err, killed, c.want, c.err, c.killed)
			}
			if c.cancel && !errors.Is(err, lineproc.ErrGaveUp) {
				t.Errorf("ReadLine after the context ended: %v, want ErrGaveUp", err)
			}
		})
	}
}

// A worker's handshake: ready, not ready with its reason, or a line that
// is no handshake at all.
func TestReady(t *testing.T) {
	for _, c := range []struct {
		line string
		ok   bool
		why  string
	}{
		{`{"ready": true}` + "\n", true, ""},
		{`{"ready": false, "error": "No module named 'wandb'"}`, false, "No module named 'wandb'"},
		{`{"hello": 1}`, false, ""},
		{`Traceback (most recent call last):`, false, ""},
	} {
		if ok, why := lineproc.Ready([]byte(c.line)); ok != c.ok || why != c.why {
			t.Errorf("Ready(%q) = %v, %q; want %v, %q", c.line, ok, why, c.ok, c.why)
		}
	}
}

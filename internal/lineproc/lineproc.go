// Package lineproc holds what rlpipe's line-protocol workers share (the
// chat-template worker, the wandb tracker's worker): a Python process
// that answers each request line with one reply line on its stdout.
//
// ReadLine reads a reply, and gives up when the caller's context ends
// first: it calls kill, which must end what the reader reads (kill the
// worker, whose stdout then closes), so that no goroutine is left behind:
//
//	line, err := lineproc.ReadLine(ctx, out, func() { _ = cmd.Process.Kill() })
//	if errors.Is(err, lineproc.ErrGaveUp) { ... ctx ended: the worker is killed ... }
package lineproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrGaveUp: the context ended before the line came; the error wraps the
// context's error too.
var ErrGaveUp = errors.New("gave up waiting for a reply line")

// ReadLine reads one line from r, its newline included. When ctx ends
// first it calls kill, waits for the read to return, and returns an
// ErrGaveUp that wraps ctx's error; otherwise the read's error (io.EOF
// when the worker exited).
func ReadLine(ctx context.Context, r *bufio.Reader, kill func()) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := r.ReadBytes('\n')
		done <- result{b, err}
	}()
	select {
	case res := <-done:
		return res.b, res.err
	case <-ctx.Done():
		kill()
		<-done // what kill ended closes the reader
		return nil, fmt.Errorf("%w: %w", ErrGaveUp, ctx.Err())
	}
}

// Ready reads a worker's first line, its handshake: {"ready": true}, or
// {"ready": false, "error": why} when it could not start (a package
// missing, a file unreadable). ok is false for anything else too, with
// why "": the caller then quotes the line.
func Ready(line []byte) (ok bool, why string) {
	var hello struct {
		Ready bool   `json:"ready"`
		Error string `json:"error"`
	}
	if json.Unmarshal(line, &hello) != nil {
		return false, ""
	}
	return hello.Ready, hello.Error
}

package loopback

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// deadlineWriter is a flushing writer that also takes write deadlines,
// which http.ResponseController reaches only through Recorder.Unwrap.
type deadlineWriter struct {
	*httptest.ResponseRecorder
	deadline time.Time
}

func (w *deadlineWriter) SetWriteDeadline(t time.Time) error {
	w.deadline = t
	return nil
}

// plainWriter hides every method but those of http.ResponseWriter: it
// cannot flush or take deadlines.
type plainWriter struct{ http.ResponseWriter }

func TestRecorder(t *testing.T) {
	deadline := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name     string
		plain    bool // the underlying writer is a plainWriter
		do       func(*Recorder) error
		wrote    bool
		status   int    // Recorder.Status, and what the client got if wrote
		body     string // what the client got
		flushed  bool
		deadline time.Time // what the underlying writer was given
		err      error
	}{
		{name: "nothing", do: func(*Recorder) error { return nil }},
		{name: "write only", do: func(r *Recorder) error {
			_, err := r.Write([]byte("hi"))
			return err
		}, wrote: true, status: http.StatusOK, body: "hi"},
		{name: "header then write", do: func(r *Recorder) error {
			r.WriteHeader(http.StatusNotFound)
			_, err := r.Write([]byte("no"))
			return err
		}, wrote: true, status: http.StatusNotFound, body: "no"},
		{name: "second header ignored", do: func(r *Recorder) error {
			r.WriteHeader(http.StatusAccepted)
			r.WriteHeader(http.StatusInternalServerError)
			return nil
		}, wrote: true, status: http.StatusAccepted},
		{name: "flush first", do: func(r *Recorder) error {
			r.Flush()
			return nil
		}, wrote: true, status: http.StatusOK, flushed: true},
		{name: "flush after header", do: func(r *Recorder) error {
			r.WriteHeader(http.StatusCreated)
			r.Flush()
			return nil
		}, wrote: true, status: http.StatusCreated, flushed: true},
		{name: "flush without a flusher", plain: true, do: func(r *Recorder) error {
			r.Flush()
			return nil
		}},
		{name: "controller flushes", do: func(r *Recorder) error {
			return http.NewResponseController(r).Flush()
		}, wrote: true, status: http.StatusOK, flushed: true},
		{name: "controller unwraps", do: func(r *Recorder) error {
			return http.NewResponseController(r).SetWriteDeadline(deadline)
		}, deadline: deadline},
		{name: "controller unwraps to a plain writer", plain: true, do: func(r *Recorder) error {
			return http.NewResponseController(r).SetWriteDeadline(deadline)
		}, err: http.ErrNotSupported},
	} {
		t.Run(c.name, func(t *testing.T) {
			dw := &deadlineWriter{ResponseRecorder: httptest.NewRecorder()}
			var under http.ResponseWriter = dw
			if c.plain {
				under = plainWriter{dw}
			}
			r := &Recorder{ResponseWriter: under}
			if err := c.do(r); !errors.Is(err, c.err) {
				t.Fatalf("error %v, want %v", err, c.err)
			}
			if r.Wrote != c.wrote || r.Status != c.status {
				t.Errorf("Wrote, Status = %v, %d; want %v, %d", r.Wrote, r.Status, c.wrote, c.status)
			}
			if c.wrote && dw.Code != c.status {
				t.Errorf("client got status %d, want %d", dw.Code, c.status)
			}
			if got := dw.Body.String(); got != c.body {
				t.Errorf("client got body %q, want %q", got, c.body)
			}
			if dw.Flushed != c.flushed {
				t.Errorf("flushed %v, want %v", dw.Flushed, c.flushed)
			}
			if !dw.deadline.Equal(c.deadline) {
				t.Errorf("write deadline %v, want %v", dw.deadline, c.deadline)
			}
			if r.Unwrap() != under {
				t.Error("Unwrap is not the underlying writer")
			}
			if r.Message != "" {
				t.Errorf("Message = %q; Recorder must leave it to the server", r.Message)
			}
		})
	}
}

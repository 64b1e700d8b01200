package loopback

import "net/http"

// Recorder wraps a server's http.ResponseWriter to note whether and with
// which status the handler answered, for the server's request log and for
// its panic recovery (which answers 500 only if nothing was written yet).
//
// It passes everything through unchanged. Flush pushes out what was
// written when the underlying writer can flush (event streams need it),
// and Unwrap lets http.ResponseController reach the underlying writer for
// the rest (deadlines, full duplex).
type Recorder struct {
	http.ResponseWriter

	// Wrote reports whether the handler has sent the status line (by
	// WriteHeader, a first Write or a Flush).
	Wrote bool
	// Status is the first status sent: the one the client got. It is 0
	// while nothing is written.
	Status int
	// Message is the message of an error answer, for the log. Recorder
	// never sets it; a server's error writer does.
	Message string
}

// WriteHeader notes code if it is the first status sent, and passes it on.
func (r *Recorder) WriteHeader(code int) {
	if !r.Wrote {
		r.Wrote, r.Status = true, code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write notes an implicit 200 if nothing was written yet, and passes b on.
func (r *Recorder) Write(b []byte) (int, error) {
	if !r.Wrote {
		r.Wrote, r.Status = true, http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Flush flushes the underlying writer if it can, noting an implicit 200 if
// nothing was written yet; otherwise it does nothing.
func (r *Recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		if !r.Wrote {
			r.Wrote, r.Status = true, http.StatusOK
		}
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

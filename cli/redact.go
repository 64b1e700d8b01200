package cli

import (
	"bytes"
	"io"
	"strings"
)

// secretEnv names the environment variables whose values must never reach
// the terminal or a log: lakectl's credentials, those of `rlpipe store
// serve`, and the tokens of rlpipe's servers.
var secretEnv = [...]string{
	"LAKECTL_CREDENTIALS_ACCESS_KEY_ID",
	"LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY",
	"RLPIPE_STORE_ACCESS_KEY_ID",
	"RLPIPE_STORE_SECRET_ACCESS_KEY",
	"RLPIPE_POLICY_TOKEN",
	"RLPIPE_UI_TOKEN",
}

const redacted = "[REDACTED]"

// redactor blanks out credential values in text bound for the user: error
// messages and log lines, whatever library produced them.
type redactor struct{ secrets []string }

func newRedactor(getenv func(string) string) redactor {
	var r redactor
	for _, k := range secretEnv {
		// Very short values would blank out ordinary words; credentials are
		// never that short.
		if v := getenv(k); len(v) >= 4 {
			r.secrets = append(r.secrets, v)
		}
	}
	return r
}

func (r redactor) redact(s string) string {
	for _, v := range r.secrets {
		s = strings.ReplaceAll(s, v, redacted)
	}
	return s
}

// writer wraps w so that every write is redacted. zerolog writes one event
// per Write call, so a secret is never split across writes.
func (r redactor) writer(w io.Writer) io.Writer {
	if len(r.secrets) == 0 {
		return w
	}
	return &redactingWriter{w: w, r: r}
}

type redactingWriter struct {
	w io.Writer
	r redactor
}

func (rw *redactingWriter) Write(p []byte) (int, error) {
	out := p
	for _, v := range rw.r.secrets {
		out = bytes.ReplaceAll(out, []byte(v), []byte(redacted))
	}
	if _, err := rw.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

package bounded

import (
	"strings"
	"sync"
)

// Tail is an io.Writer, safe for concurrent use, that keeps the last Max
// bytes written to it: a child process's stderr, for the error that names
// why it died. Max 0 keeps 2 KiB.
type Tail struct {
	Max int
	mu  sync.Mutex
	b   []byte
}

// Write keeps p's end; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	max := t.Max
	if max <= 0 {
		max = 2048
	}
	t.b = append(t.b, p...)
	if over := len(t.b) - max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// Text is what the tail holds.
func (t *Tail) Text() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// Lines is the last n lines of the tail that hold more than white space,
// oldest first, each without its trailing blanks; a carriage return ends a
// line too (a progress bar's redraws). The first kept line may be the
// end of a longer one that fell out of the tail.
func (t *Tail) Lines(n int) []string {
	var kept []string
	for _, l := range strings.FieldsFunc(t.Text(), func(r rune) bool { return r == '\n' || r == '\r' }) {
		if strings.TrimSpace(l) != "" {
			kept = append(kept, strings.TrimRight(l, " \t"))
		}
	}
	return kept[max(0, len(kept)-n):]
}

// LastLine is the last non-empty line the tail holds, trimmed: a
// traceback's exception, the line that says why a child died. "" when
// the tail holds only blanks.
func (t *Tail) LastLine() string {
	s := strings.TrimSpace(t.Text())
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[i+1:])
	}
	return s
}

package bounded_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/rlpipe/rlpipe/internal/bounded"
)

func TestTailKeepsTheEnd(t *testing.T) {
	tl := &bounded.Tail{Max: 8}
	for _, s := range []string{"abc", "defgh", "ijkl"} {
		if n, err := tl.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := tl.Text(); got != "efghijkl" {
		t.Errorf("Text = %q, want efghijkl", got)
	}
	def := &bounded.Tail{}
	fmt.Fprint(def, strings.Repeat("x", 3000)+"end")
	if got := def.Text(); len(got) != 2048 || !strings.HasSuffix(got, "end") {
		t.Errorf("default Max kept %d bytes ending %q, want 2048 ending in end", len(got), got[len(got)-3:])
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { fmt.Fprint(tl, "0123456789") })
	}
	wg.Wait()
	if got := tl.Text(); got != "23456789" {
		t.Errorf("after concurrent writes Text = %q, want 23456789", got)
	}
}

func TestTailLastLine(t *testing.T) {
	for _, c := range []struct{ name, written, want string }{
		{"nothing", "", ""},
		{"blanks", " \n\n", ""},
		{"one line", "boom\n", "boom"},
		{"a traceback", "Traceback (most recent call last):\n  File \"x\", line 1\nValueError: bad\n\n", "ValueError: bad"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tl := &bounded.Tail{}
			tl.Write([]byte(c.written))
			if got := tl.LastLine(); got != c.want {
				t.Errorf("LastLine() = %q, want %q", got, c.want)
			}
		})
	}
}

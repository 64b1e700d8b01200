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

func TestTailLines(t *testing.T) {
	for _, c := range []struct {
		name, in string
		n        int
		want     []string
	}{
		{"empty", "", 3, nil},
		{"blank only", " \n\t\n\r\n", 3, nil},
		{"fewer than n", "a\nb\n", 3, []string{"a", "b"}},
		{"last n", "a\nb\nc\nd\n", 2, []string{"c", "d"}},
		{"last one", "Traceback:\n  File x\nValueError: bad\n\n", 1, []string{"ValueError: bad"}},
		{"blank lines skipped", "a\n\n  \nb", 2, []string{"a", "b"}},
		{"indent kept, trailing blanks cut", "  x  \t\n", 1, []string{"  x"}},
		{"carriage return ends a line", "10%\r50%\r100%\n", 2, []string{"50%", "100%"}},
		{"crlf", "a\r\nb\r\n", 5, []string{"a", "b"}},
		{"n zero", "a\n", 0, []string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tl := &bounded.Tail{}
			fmt.Fprint(tl, c.in)
			got := tl.Lines(c.n)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", c.want) {
				t.Errorf("Lines(%d) of %q = %q, want %q", c.n, c.in, got, c.want)
			}
		})
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

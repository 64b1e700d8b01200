package configtest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// fatalRecorder is a testing.TB whose Fatalf records the message and
// ends the goroutine, as the real one does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, a ...any) {
	r.msg = fmt.Sprintf(format, a...)
	runtime.Goexit()
}

func TestEdit(t *testing.T) {
	const src = "iterations: 60\nn: 16\nk: [1, 16]\n"
	for _, tc := range []struct {
		name    string
		edits   map[string]string
		want    string
		wantErr string
	}{
		{name: "no edits", want: src},
		{name: "each key once", edits: map[string]string{"iterations: 60": "iterations: 4", "16": "4"}, want: "iterations: 4\nn: 4\nk: [1, 16]\n"},
		{name: "a key the config lacks", edits: map[string]string{"iterations: 60": "iterations: 4", "every: 10": "every: 2"}, wantErr: `pipeline.yaml no longer has "every: 10"; update this test`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &fatalRecorder{TB: t}
			var got string
			done := make(chan struct{})
			go func() {
				defer close(done)
				got = Edit(r, "pipeline.yaml", src, tc.edits)
			}()
			<-done
			if r.msg != tc.wantErr || (tc.wantErr == "" && got != tc.want) {
				t.Fatalf("Edit = %q, failure %q; want %q, failure %q", got, r.msg, tc.want, tc.wantErr)
			}
		})
	}
}

func TestAbs(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Abs(t, "../x.yaml"), filepath.Join(filepath.Dir(wd), "x.yaml"); got != want {
		t.Fatalf("Abs(../x.yaml) = %q, want %q", got, want)
	}
}

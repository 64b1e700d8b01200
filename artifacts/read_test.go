package artifacts_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
)

// TestRead reads one stored object whole (ReadObject) and in ranges
// (RangeReaderAt, through the embedded store's GetObjectRange).
func TestRead(t *testing.T) {
	ctx := context.Background()
	st := artifactstest.NewLocal(t)
	if _, err := st.PutObject(ctx, "main", "a.txt", strings.NewReader("hello world"), nil); err != nil {
		t.Fatal(err)
	}
	t.Run("ReadObject", func(t *testing.T) {
		if b, err := artifacts.ReadObject(ctx, st, "main", "a.txt"); err != nil || string(b) != "hello world" {
			t.Errorf("ReadObject(a.txt) = %q, %v", b, err)
		}
		if b, err := artifacts.ReadObject(ctx, st, "main", "missing.txt"); err != nil || b != nil {
			t.Errorf("ReadObject(missing) = %q, %v; want nil, nil", b, err)
		}
	})
	// A read past the end gives the bytes there are and io.EOF.
	for _, tc := range []struct {
		name    string
		path    string
		off     int64
		size    int
		want    string
		wantErr error
	}{
		{name: "inside", path: "a.txt", off: 6, size: 5, want: "world"},
		{name: "from the start", path: "a.txt", off: 0, size: 5, want: "hello"},
		{name: "past the end", path: "a.txt", off: 6, size: 10, want: "world", wantErr: io.EOF},
		{name: "missing object", path: "b.txt", off: 0, size: 5, want: "", wantErr: artifacts.ErrObjectNotFound},
	} {
		t.Run("RangeReaderAt/"+tc.name, func(t *testing.T) {
			p := make([]byte, tc.size)
			n, err := artifacts.RangeReaderAt(ctx, st, "main", tc.path).ReadAt(p, tc.off)
			if got := string(p[:n]); got != tc.want || !errors.Is(err, tc.wantErr) {
				t.Errorf("ReadAt(%d bytes at %d) = %q, %v; want %q, %v", tc.size, tc.off, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

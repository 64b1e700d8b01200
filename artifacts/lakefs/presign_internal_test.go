package lakefs

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
)

// TestPresignFallsBackOnMissingEndpoints: a server whose configuration
// says it presigns but whose staging endpoints answer 404 (no such
// endpoint) or 501 gets the object through the API, and is not asked to
// stage again; a 404 naming the branch is the put's own error.
func TestPresignFallsBackOnMissingEndpoints(t *testing.T) {
	cases := []struct {
		name       string
		status     int
		message    string
		wantErr    string
		wantSecond []string // the requests of a second put
	}{
		{name: "501", status: http.StatusNotImplemented, message: "Not Implemented",
			wantSecond: []string{"POST /repositories/rlpipe-test/branches/main/objects?path=b"}},
		{name: "404 no endpoint", status: http.StatusNotFound, message: "no endpoint GET /api/v1/repositories/rlpipe-test/branches/main/staging/backing",
			wantSecond: []string{"POST /repositories/rlpipe-test/branches/main/objects?path=b"}},
		{name: "404 branch", status: http.StatusNotFound, message: "branch not found",
			wantErr: "lakefs: put main:a: branch not found: branch not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStub(t)
			s.handle("GET /config", func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, 200, map[string]any{"storage_config": map[string]any{"blockstore_type": "s3", "pre_sign_support": true}})
			})
			s.handle("GET /repositories/{repo}/branches/{branch}/staging/backing", func(w http.ResponseWriter, r *http.Request) {
				writeError(w, c.status, c.message)
			})
			s.handle("POST /repositories/{repo}/branches/{branch}/objects", func(w http.ResponseWriter, r *http.Request) {
				n, _ := io.Copy(io.Discard, r.Body)
				writeJSON(w, 201, map[string]any{"path": r.URL.Query().Get("path"), "path_type": "object", "checksum": "x", "size_bytes": n, "mtime": 1})
			})
			st := s.store()
			st.c.threshold = 4
			body := strings.Repeat("x", 16)
			_, err := st.PutObject(context.Background(), "main", "a", strings.NewReader(body), nil)
			if c.wantErr != "" {
				if !errors.Is(err, artifacts.ErrBranchNotFound) || err.Error() != c.wantErr {
					t.Fatalf("put: %v, want %s", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("put: %v", err)
			}
			want := []string{"GET /config", "GET /repositories/rlpipe-test/branches/main/staging/backing?path=a&presign=true", "POST /repositories/rlpipe-test/branches/main/objects?path=a"}
			if got := s.requests(); !slices.Equal(got, want) {
				t.Fatalf("first put sent %q, want %q", got, want)
			}
			if _, err := st.PutObject(context.Background(), "main", "b", strings.NewReader(body), nil); err != nil {
				t.Fatalf("second put: %v", err)
			}
			if got := s.requests()[len(want):]; !slices.Equal(got, c.wantSecond) {
				t.Fatalf("second put sent %q, want %q", got, c.wantSecond)
			}
		})
	}
}

func TestParseThreshold(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "33554432", want: 32 << 20},
		{in: "32MiB", want: 32 << 20},
		{in: "64 M", want: 64 << 20},
		{in: "1GiB", want: 1 << 30},
		{in: "512KiB", want: 512 << 10},
		{in: "0", want: 0},
		{in: "off", want: -1},
		{in: "OFF", want: -1},
		{in: "-1", bad: true},
		{in: "32MB", bad: true},
		{in: "lots", bad: true},
		{in: "99999999999GiB", bad: true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := parseThreshold(c.in)
			if c.bad {
				want := `invalid argument: lakefs: RLPIPE_LAKEFS_PRESIGN_THRESHOLD="` + c.in + `": want a size in bytes such as 33554432 or 32MiB, or off`
				if !errors.Is(err, artifacts.ErrInvalid) || err.Error() != want {
					t.Fatalf("got %d, %v; want %s", got, err, want)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %d, %v; want %d", got, err, c.want)
			}
		})
	}
	t.Run("from the environment", func(t *testing.T) {
		t.Setenv(EnvEndpoint, "http://127.0.0.1:8000")
		t.Setenv(EnvPresignThreshold, "lots")
		_, err := NewClient(ConfigFromEnv())
		if !errors.Is(err, artifacts.ErrInvalid) || !strings.Contains(err.Error(), EnvPresignThreshold) {
			t.Fatalf("NewClient: %v, want an error naming %s", err, EnvPresignThreshold)
		}
		t.Setenv(EnvPresignThreshold, "")
		c, err := NewClient(ConfigFromEnv())
		if err != nil || c.threshold != DefaultPresignThreshold {
			t.Fatalf("NewClient without the variable: threshold %v, %v; want %d", c, err, DefaultPresignThreshold)
		}
	})
}

package openenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/loopback"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
)

// TestLostPort: a start whose port another process took before uvicorn
// bound it starts again on a new port, whether the other process answers
// /health (a 200 that is not the app's: the episodes must not go there)
// or holds the port silently (uvicorn exits "address already in use").
// Losing it every time is ErrStart, saying so.
func TestLostPort(t *testing.T) {
	py := pyvenv.OpenEnv.Python(t, "serve OpenEnv environments")
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	answering := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"status":"healthy"}`)) }))
	t.Cleanup(answering.Close)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() { // accepts and closes: no HTTP
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	portOf := func(addr string) int {
		_, p, _ := net.SplitHostPort(strings.TrimPrefix(addr, "http://"))
		n, _ := strconv.Atoi(p)
		return n
	}
	for _, c := range []struct {
		name   string
		taken  int
		always bool
		starts int
		err    string
	}{
		{"another server answers /health on it", portOf(answering.URL), false, 2, ""},
		{"another process holds it silently", portOf(silent.Addr().String()), false, 2, ""},
		{"lost every time", portOf(silent.Addr().String()), true, 3, fmt.Sprintf("serve dying_app:app: port %d was taken by another process before the server bound it, 3 times; its stderr ends: ", portOf(silent.Addr().String()))},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewServer(ServeOptions{App: "dying_app:app", Python: filepath.Dir(filepath.Dir(py)), Cwd: dir}, "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			calls := 0
			s.freePort = func() (int, error) {
				calls++
				if calls == 1 || c.always {
					return c.taken, nil
				}
				return loopback.FreePort()
			}
			base, err := s.Base(context.Background())
			if n := s.Starts(); n != c.starts {
				t.Errorf("%d starts, want %d", n, c.starts)
			}
			if c.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), c.err) || !strings.Contains(err.Error(), "address already in use") ||
					!strings.HasSuffix(err.Error(), ": stop what takes loopback ports or retry the run") || !errors.Is(err, ErrStart) {
					t.Errorf("Base: %v\nwant ErrStart %s…address already in use…: stop what takes loopback ports or retry the run", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if portOf(base) == c.taken {
				t.Fatalf("Base %s: the taken port", base)
			}
			resp, err := http.Get(base + "/schema")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s/schema: %v", base, err)
			}
			resp.Body.Close()
		})
	}
}

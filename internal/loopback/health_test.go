package loopback_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/rlpipe/rlpipe/internal/loopback"
)

// WaitHealthy returns nil once the route answers 200 (after a 503),
// ErrExited when the process is gone, and ctx's error when it ends.
func TestWaitHealthy(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	if err := loopback.WaitHealthy(context.Background(), srv.URL+"/health", nil); err != nil || calls != 2 {
		t.Errorf("a server that turns healthy: %v after %d calls, want nil after 2", err, calls)
	}

	port, err := loopback.FreePort()
	if err != nil || port <= 0 {
		t.Fatalf("FreePort: %d, %v", port, err)
	}
	down := "http://127.0.0.1:" + strconv.Itoa(port) + "/health"
	exited := make(chan struct{})
	close(exited)
	if err := loopback.WaitHealthy(context.Background(), down, exited); !errors.Is(err, loopback.ErrExited) {
		t.Errorf("an exited server: %v, want ErrExited", err)
	}
	// Another server answers 200 on the port of a child that has exited
	// (it lost the port): not the child's health.
	if err := loopback.WaitHealthy(context.Background(), srv.URL+"/health", exited); !errors.Is(err, loopback.ErrExited) {
		t.Errorf("a 200 from another server after the child exited: %v, want ErrExited", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := loopback.WaitHealthy(ctx, down, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("an ended context: %v, want context.Canceled", err)
	}
}

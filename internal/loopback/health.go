package loopback

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// FreePort asks the kernel for a free TCP port on the loopback, for a
// child server to bind. Another process may take it before the child
// binds it; the child then fails with "address already in use".
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ErrExited is WaitHealthy's error when the server's process exited
// first.
var ErrExited = errors.New("the server exited before its health route answered")

// WaitHealthy polls GET url (a child server's health route: vLLM's or an
// OpenEnv app's /health) until it answers 200 OK. It returns ErrExited
// once exited is closed (the process is gone), even when the route
// answered (then another process holds the port), and ctx's error when ctx
// ends first: the callers say which server and what its log said. Polls
// start at 50 ms apart and slow to 500 ms.
func WaitHealthy(ctx context.Context, url string, exited <-chan struct{}) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	wait := 50 * time.Millisecond
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				// A 200 from a process that has exited is another
				// server's on the same port (the child lost the port).
				select {
				case <-exited:
					return ErrExited
				default:
					return nil
				}
			}
		}
		select {
		case <-exited:
			return ErrExited
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

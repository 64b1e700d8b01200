package loopback

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// listen binds a real loopback socket for a test.
func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := Listen(t.Context(), "127.0.0.1:0", false, func(addr string) error { return errors.New("refused " + addr) })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestServe(t *testing.T) {
	t.Run("clean shutdown", func(t *testing.T) {
		l := listen(t)
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		served := make(chan error, 1)
		go func() { served <- Serve(ctx, hs, l, time.Minute) }()

		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get("http://" + l.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || string(body) != "ok" {
			t.Fatalf("GET: %d %q, %v; want 200 \"ok\"", resp.StatusCode, body, err)
		}
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve after cancel: %v, want nil", err)
		}
	})

	t.Run("requests cut off", func(t *testing.T) {
		l := listen(t)
		entered, release, left := make(chan struct{}), make(chan struct{}), make(chan struct{})
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer close(left)
			close(entered)
			<-release
		})}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		served := make(chan error, 1)
		go func() { served <- Serve(ctx, hs, l, 50*time.Millisecond) }()

		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		got := make(chan error, 1)
		go func() {
			resp, err := (&http.Client{Transport: tr}).Get("http://" + l.Addr().String() + "/")
			if err == nil {
				resp.Body.Close()
			}
			got <- err
		}()
		<-entered
		cancel()
		err := <-served
		close(release)
		<-left
		if !errors.Is(err, ErrCutOff) {
			t.Errorf("Serve with a request in flight: %v, want ErrCutOff", err)
		}
		if want := "shut down " + l.Addr().String() + ": requests still in flight after 50ms were cut off"; err == nil || err.Error() != want {
			t.Errorf("error %q, want %q", err, want)
		}
		if err := <-got; err == nil {
			t.Errorf("the cut-off request got an answer")
		}
	})

	t.Run("listener fails", func(t *testing.T) {
		l := listen(t)
		l.Close()
		err := Serve(t.Context(), &http.Server{Handler: http.NotFoundHandler()}, l, time.Minute)
		if !errors.Is(err, net.ErrClosed) || errors.Is(err, ErrCutOff) || !strings.HasPrefix(err.Error(), "serve ") {
			t.Errorf("Serve on a closed listener: %v, want serve …: %v", err, net.ErrClosed)
		}
	})
}

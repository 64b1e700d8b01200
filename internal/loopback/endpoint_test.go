package loopback

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

var errRefused = errors.New("refused")

// endpoint is a test server's Endpoint whose refusal names the address.
func endpoint(addr string, hasSecret bool) Endpoint {
	return Endpoint{Name: "test", Addr: addr, HasSecret: hasSecret, ShutdownTimeout: time.Minute,
		Refuse: func(a string) error { return fmt.Errorf("test: listen %s: %w", a, errRefused) }}
}

func TestEndpointCheck(t *testing.T) {
	for _, c := range []struct {
		name      string
		addr      string
		hasSecret bool
		want      string // "" for no error
	}{
		{name: "loopback", addr: "127.0.0.1:0"},
		{name: "host name left to Listen", addr: "example.test:80"},
		{name: "every interface", addr: ":8000", want: "test: listen :8000: refused"},
		{name: "public IP", addr: "10.1.2.3:80", want: "test: listen 10.1.2.3:80: refused"},
		{name: "public IP with a secret", addr: "10.1.2.3:80", hasSecret: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := endpoint(c.addr, c.hasSecret).Check()
			if c.want == "" {
				if err != nil {
					t.Fatalf("Check: %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != c.want || !errors.Is(err, errRefused) {
				t.Fatalf("Check: %v, want %q", err, c.want)
			}
		})
	}
}

func TestEndpointListen(t *testing.T) {
	for _, c := range []struct {
		name    string
		addr    string
		want    string // "" for a listener
		refused bool
	}{
		{name: "loopback", addr: "127.0.0.1:0"},
		{name: "refusal as is", addr: "0.0.0.0:0", want: "test: listen 0.0.0.0:0: refused", refused: true},
		{name: "bad address named", addr: "nonsense", want: "test: listen nonsense: address nonsense: missing port in address"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := endpoint(c.addr, false).Listen(t.Context())
			if c.want == "" {
				if err != nil {
					t.Fatalf("Listen: %v", err)
				}
				l.Close()
				return
			}
			if err == nil || err.Error() != c.want || errors.Is(err, errRefused) != c.refused {
				t.Fatalf("Listen: %v, want %q", err, c.want)
			}
		})
	}
}

func TestEndpointServe(t *testing.T) {
	t.Run("shut down", func(t *testing.T) {
		e := endpoint("127.0.0.1:0", false)
		l, err := e.Listen(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // Serve shuts down at once
		stopped := 0
		if err := e.Serve(ctx, &http.Server{Handler: http.NotFoundHandler()}, l, func() { stopped++ }); err != nil {
			t.Errorf("Serve: %v, want nil", err)
		}
		if stopped != 1 {
			t.Errorf("stopped called %d times, want 1", stopped)
		}
	})
	t.Run("listener fails", func(t *testing.T) {
		e := endpoint("127.0.0.1:0", false)
		l, err := e.Listen(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		stopped := 0
		err = e.Serve(t.Context(), &http.Server{Handler: http.NotFoundHandler()}, l, func() { stopped++ })
		if !errors.Is(err, net.ErrClosed) || !strings.HasPrefix(err.Error(), "test: serve "+l.Addr().String()+": ") {
			t.Errorf("Serve on a closed listener: %v, want test: serve %s: …: %v", err, l.Addr(), net.ErrClosed)
		}
		if stopped != 0 {
			t.Errorf("stopped called %d times after the listener failed, want 0", stopped)
		}
	})
}

func TestDigest(t *testing.T) {
	d := DigestOf("0123456789abcdef")
	for _, c := range []struct {
		name      string
		presented string
		want      bool
	}{
		{name: "same", presented: "0123456789abcdef", want: true},
		{name: "other", presented: "fedcba9876543210"},
		{name: "prefix", presented: "0123456789abcde"},
		{name: "longer", presented: "0123456789abcdef0"},
		{name: "empty", presented: ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := d.Matches(c.presented); got != c.want {
				t.Errorf("Matches(%q) = %v, want %v", c.presented, got, c.want)
			}
		})
	}
}

func TestBearer(t *testing.T) {
	for _, c := range []struct {
		name   string
		header string // Authorization; "" for none
		tok    string
		ok     bool
	}{
		{name: "none"},
		{name: "bearer", header: "Bearer abc", tok: "abc", ok: true},
		{name: "white space trimmed", header: "Bearer  abc ", tok: "abc", ok: true},
		{name: "empty token", header: "Bearer ", tok: "", ok: true},
		{name: "basic", header: "Basic YTpi"},
		{name: "lower case scheme", header: "bearer abc"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.header != "" {
				r.Header.Set("Authorization", c.header)
			}
			if tok, ok := Bearer(r); tok != c.tok || ok != c.ok {
				t.Errorf("Bearer = %q, %v; want %q, %v", tok, ok, c.tok, c.ok)
			}
		})
	}
}

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"": true, "127.0.0.1": true, "127.0.0.1:8080": true, "[::1]:80": true, "::1": true,
		"localhost": true, "LocalHost:1": true, "127.1.2.3:1": true,
		"example.test": false, "localhost.example.test:1": false, "10.1.2.3:80": false, "[2001:db8::1]:1": false,
	} {
		if got := LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

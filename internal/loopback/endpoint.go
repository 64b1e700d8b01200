package loopback

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// Endpoint is where one of rlpipe's servers listens and how it stays
// private. The policy server, the UI and the store server each build one
// in New and bind and serve through it, so that they refuse the same
// addresses and name themselves in their errors the same way.
type Endpoint struct {
	// Name starts the server's errors ("ui" gives "ui: listen …").
	Name string
	// Addr is the HOST:PORT the server binds.
	Addr string
	// HasSecret reports whether requests must carry a token or
	// credentials; only then may Addr be other than loopback.
	HasSecret bool
	// Refuse returns the error for an address other than loopback without
	// a secret. It names the server and the remedy itself; Endpoint
	// returns it as is.
	Refuse func(addr string) error
	// ShutdownTimeout is how long Serve lets requests in flight finish.
	ShutdownTimeout time.Duration
}

// Check refuses, before anything is bound, an address that is plainly
// not loopback (see PlainlyPublic) for a server without a secret. Listen
// checks again after resolving a host name.
func (e Endpoint) Check() error {
	if !e.HasSecret && PlainlyPublic(e.Addr) {
		return e.Refuse(e.Addr)
	}
	return nil
}

// Listen binds e.Addr as the package's Listen does. A refusal is
// e.Refuse's error; any other error starts with e.Name.
func (e Endpoint) Listen(ctx context.Context) (net.Listener, error) {
	refused := false
	l, err := Listen(ctx, e.Addr, e.HasSecret, func(addr string) error {
		refused = true
		return e.Refuse(addr)
	})
	if err != nil && !refused {
		err = fmt.Errorf("%s: %w", e.Name, err)
	}
	return l, err
}

// Serve runs hs on l as the package's Serve does, with e.ShutdownTimeout;
// its error starts with e.Name. stopped, if not nil, is called once the
// server has shut down, cleanly or by cutting requests off, but not when
// l failed: it is where the server logs that it stopped.
func (e Endpoint) Serve(ctx context.Context, hs *http.Server, l net.Listener, stopped func()) error {
	err := Serve(ctx, hs, l, e.ShutdownTimeout)
	if stopped != nil && (err == nil || errors.Is(err, ErrCutOff)) {
		stopped()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", e.Name, err)
	}
	return nil
}

// Digest is the SHA-256 of a server's secret (a token, an access key, a
// secret key), kept in its place. Matches compares digests of equal
// length in constant time, so that neither the secret nor its length
// leaks through timing.
type Digest [sha256.Size]byte

// DigestOf returns the digest of secret.
func DigestOf(secret string) Digest { return sha256.Sum256([]byte(secret)) }

// Matches reports whether presented is the secret d was made of.
func (d *Digest) Matches(presented string) bool {
	sum := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(sum[:], d[:]) == 1
}

// Bearer returns the token of r's Authorization: Bearer header, white
// space trimmed, and whether r has such a header.
func Bearer(r *http.Request) (string, bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// LoopbackHost reports whether a request's Host (HOST or HOST:PORT, as
// the client sent it) names loopback: empty, localhost or a loopback IP.
// A server without a secret answers only such requests, which guards it
// against DNS rebinding: a web page on another site whose name resolves
// to 127.0.0.1 sends its own name as Host.
func LoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	return host == "" || strings.EqualFold(host, "localhost") || IsLiteral(host)
}

// Package loopback binds servers that stay private unless told otherwise:
// rlpipe's servers (the policy server, the UI, the store server) listen
// on loopback by default and need a token or credentials for any other
// address. Listen binds such a server; Serve runs it until its context
// ends and shuts it down within a timeout; an Endpoint holds a server's
// address, secret and name and does both for it. Digest compares a token
// or credentials in constant time, Bearer reads a bearer token and
// LoopbackHost checks a request's Host. Recorder wraps a server's response
// writer to note the status each request was answered with, for its
// request log and its panic recovery. For the child servers rlpipe
// starts (vLLM, OpenEnv apps), FreePort picks their port and WaitHealthy
// waits for their health route.
package loopback

import (
	"context"
	"fmt"
	"net"
	"strings"
	"unicode/utf8"
)

// MinTokenLength is the fewest characters a server's token may have: 16
// is what `openssl rand -hex 8` prints, the least the docs suggest.
const MinTokenLength = 16

// CheckToken refuses a token a server must not accept: blank (white space
// only), with white space around it (which HTTP drops from a header), or
// shorter than MinTokenLength. env names the variable it came from; the
// token itself is never part of the error.
func CheckToken(env, token string) error {
	switch {
	case strings.TrimSpace(token) == "":
		return fmt.Errorf("%s is blank: set it to a secret of at least %d characters (e.g. $(openssl rand -hex 16)), or unset it", env, MinTokenLength)
	case strings.TrimSpace(token) != token:
		return fmt.Errorf("%s starts or ends with white space, which HTTP drops: remove it", env)
	case utf8.RuneCountInString(token) < MinTokenLength:
		return fmt.Errorf("%s has %d characters: use at least %d (e.g. $(openssl rand -hex 16))", env, utf8.RuneCountInString(token), MinTokenLength)
	}
	return nil
}

// IsLiteral reports whether host is a loopback IP address written as such.
func IsLiteral(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// PlainlyPublic reports whether addr (HOST:PORT) names, without looking
// anything up, something other than loopback: an empty host (every
// interface) or an IP address that is not loopback. Host names are left
// to Listen, which resolves them.
func PlainlyPublic(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && !ip.IsLoopback()
}

// Listen binds addr over TCP. Unless the server has a token it refuses an
// address that is not loopback — checked on the address as written, after
// resolving a host name, and again on the bound socket — with the error
// refuse(addr) returns.
func Listen(ctx context.Context, addr string, hasToken bool, refuse func(addr string) error) (net.Listener, error) {
	if !hasToken {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
		if !IsLiteral(host) {
			ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
			if host == "" || err != nil || len(ips) == 0 {
				return nil, refuse(addr)
			}
			for _, ip := range ips {
				if !ip.IP.IsLoopback() {
					return nil, refuse(addr)
				}
			}
		}
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	if ta, ok := l.Addr().(*net.TCPAddr); !hasToken && (!ok || !ta.IP.IsLoopback()) {
		l.Close()
		return nil, refuse(addr)
	}
	return l, nil
}

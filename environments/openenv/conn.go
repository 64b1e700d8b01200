package openenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/websocket"
)

// maxFrame bounds a reply frame (an observation may hold an image).
const maxFrame = 16 << 20

// frame is a message on /ws, either way: {"type": ..., "data": ...}.
type frame struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// conn is one WebSocket to a server's /ws: one session, one episode at
// a time. It is not safe for concurrent use.
type conn struct {
	ws   *websocket.Conn
	url  string
	base string // the server's http://HOST:PORT
	// timeout bounds each request's reply (0: none but ctx's).
	timeout time.Duration
}

// dial opens a WebSocket to wsURL with header (the token, when set).
func dial(ctx context.Context, wsURL string, header http.Header) (*conn, error) {
	cfg, err := websocket.NewConfig(wsURL, "http://127.0.0.1/")
	if err != nil {
		return nil, &Error{ErrUnreachable, fmt.Sprintf("connect to the openenv server at %s: %v: check rl_options url (ws://HOST:PORT/ws or http://HOST:PORT)", wsURL, err)}
	}
	cfg.Header = header
	ws, err := cfg.DialContext(ctx)
	if err != nil {
		var de *websocket.DialError
		if errors.As(err, &de) {
			err = de.Err
		}
		return nil, &Error{ErrUnreachable, fmt.Sprintf("connect to the openenv server at %s: %v: start the server (or let rlpipe start it with rl_options serve:) and check rl_options url", wsURL, err)}
	}
	ws.MaxPayloadBytes = maxFrame
	return &conn{ws: ws, url: wsURL}, nil
}

// roundTrip sends one frame and reads the reply, within ctx. Any error
// leaves the connection unusable (close it): ctx's when it ended, else
// the socket's.
func (c *conn) roundTrip(ctx context.Context, f frame) ([]byte, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	d, ok := ctx.Deadline()
	own := c.timeout > 0 && (!ok || time.Now().Add(c.timeout).Before(d))
	if own {
		d = time.Now().Add(c.timeout)
	}
	c.ws.SetDeadline(d) // zero: none
	stop := context.AfterFunc(ctx, func() { c.ws.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := websocket.Message.Send(c.ws, string(b)); err != nil {
		return nil, c.lost(ctx, err, own)
	}
	var reply []byte
	if err := websocket.Message.Receive(c.ws, &reply); err != nil {
		return nil, c.lost(ctx, err, own)
	}
	return reply, nil
}

// lost is the error of a failed send or receive: ctx's own when it
// ended, errTimedOut when c.timeout did (own: it set the deadline).
func (c *conn) lost(ctx context.Context, err error, own bool) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() && own {
		return errTimedOut
	}
	return &socketError{err}
}

// errTimedOut is a request without a reply within conn.timeout.
var errTimedOut = errors.New("no reply in time")

// socketError is a failed send or receive.
type socketError struct{ err error }

func (e *socketError) Error() string { return e.err.Error() }

// close sends {"type": "close"} (the server ends the session) and closes
// the socket.
func (c *conn) close() {
	c.ws.SetDeadline(time.Now().Add(time.Second))
	_ = websocket.Message.Send(c.ws, `{"type":"close"}`)
	c.ws.Close()
}

// nonFinite marks a NaN or ±Infinity token of a reply (Python's json
// writes them) as a string, so the reply decodes and the reward says what
// it was.
const nonFinite = "\x00nonfinite:"

// tolerate rewrites the bare NaN, Infinity and -Infinity tokens of b
// (outside strings) as strings starting with nonFinite; b is returned as
// is when it has none.
func tolerate(b []byte) []byte {
	if !bytes.Contains(b, []byte("NaN")) && !bytes.Contains(b, []byte("Infinity")) {
		return b
	}
	var out []byte
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		ch := b[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				inString = false
			}
			out = append(out, ch)
			continue
		}
		if ch == '"' {
			inString = true
			out = append(out, ch)
			continue
		}
		matched := false
		for _, tok := range []string{"NaN", "Infinity", "-Infinity"} {
			if bytes.HasPrefix(b[i:], []byte(tok)) {
				out = append(out, `"\u0000nonfinite:`+tok+`"`...)
				i += len(tok) - 1
				matched = true
				break
			}
		}
		if !matched {
			out = append(out, ch)
		}
	}
	return out
}

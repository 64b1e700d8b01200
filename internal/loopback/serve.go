package loopback

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// ErrCutOff is wrapped by the error Serve returns when requests were still
// in flight at the end of the shutdown timeout and had their connections
// closed.
var ErrCutOff = errors.New("cut off")

// Serve answers requests with hs on l until ctx ends, then shuts hs down:
// it stops taking new requests and lets those in flight finish for up to
// shutdownTimeout, after which it closes their connections. It returns nil
// after a clean shutdown and an error wrapping ErrCutOff if requests had
// to be cut off; if l fails first, it returns that error without shutting
// down. Either way it closes l and returns only once hs.Serve has.
//
// Serve leaves hs as given (handler, timeouts, BaseContext, shutdown
// hooks) and logs nothing: the caller says when its server listens and
// stops, and prefixes the error with its own name.
func Serve(ctx context.Context, hs *http.Server, l net.Listener, shutdownTimeout time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", l.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	if err != nil {
		hs.Close()
		err = fmt.Errorf("shut down %s: requests still in flight after %v were %w", l.Addr(), shutdownTimeout, ErrCutOff)
	}
	<-errc // http.ErrServerClosed
	return err
}

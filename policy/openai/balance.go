package openai

import (
	"context"
	"time"
)

// endpoint is one server and the client's view of its load and health.
// The counters are guarded by Client.mu.
type endpoint struct {
	base  string // the base URL requests are built on
	shown string // the base URL as logs and errors show it

	inFlight  int
	coolUntil time.Time // passed over until then while others are healthy
	served    int       // requests sent, for Stats

	// refused counts the attempts in a row that got no HTTP answer (a
	// refused or reset connection), the first of them at refusedSince.
	refused      int
	refusedSince time.Time
}

func (e *endpoint) cooling(now time.Time) bool { return now.Before(e.coolUntil) }

// acquire takes a slot on the endpoint with the fewest requests in flight,
// ties going round-robin. Cooling endpoints are passed over while another
// endpoint is healthy; when all cool, all are candidates. It waits while
// every candidate is full.
func (c *Client) acquire(ctx context.Context) (*endpoint, error) {
	for {
		c.mu.Lock()
		now := c.now()
		healthy := false
		for _, e := range c.eps {
			if !e.cooling(now) {
				healthy = true
				break
			}
		}
		var best *endpoint
		bestAt := 0
		for k := range c.eps {
			i := (c.next + k) % len(c.eps)
			e := c.eps[i]
			if e.inFlight >= c.opts.Concurrency || (healthy && e.cooling(now)) {
				continue
			}
			if best == nil || e.inFlight < best.inFlight {
				best, bestAt = e, i
			}
		}
		if best != nil {
			best.inFlight++
			best.served++
			c.next = (bestAt + 1) % len(c.eps)
			c.mu.Unlock()
			return best, nil
		}
		wake := c.wake
		c.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// release gives back a slot taken by acquire; cool > 0 passes the
// endpoint over for that long, cool < 0 marks it healthy again.
func (c *Client) release(e *endpoint, cool time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.inFlight--
	c.health(e, cool)
	close(c.wake)
	c.wake = make(chan struct{})
}

// health records the outcome of a request to e. Callers hold c.mu.
func (c *Client) health(e *endpoint, cool time.Duration) {
	switch {
	case cool > 0:
		e.coolUntil = c.now().Add(cool)
	case cool < 0:
		e.coolUntil = time.Time{}
	}
}

// anyHealthy reports whether some endpoint is not cooling, so a retry can
// go there at once.
func (c *Client) anyHealthy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for _, e := range c.eps {
		if !e.cooling(now) {
			return true
		}
	}
	return false
}

// EndpointStats is one endpoint's share of the work so far.
type EndpointStats struct {
	Endpoint string // the base URL, without credentials
	Requests int    // HTTP requests sent, retries included
	InFlight int
	Cooling  bool // failed recently; passed over while others are healthy
}

// Stats reports each endpoint's load, in Options.Endpoints order.
func (c *Client) Stats() []EndpointStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	out := make([]EndpointStats, len(c.eps))
	for i, e := range c.eps {
		out[i] = EndpointStats{Endpoint: e.shown, Requests: e.served, InFlight: e.inFlight, Cooling: e.cooling(now)}
	}
	return out
}

// answered records whether an attempt to e got an HTTP answer (ce nil or
// not a connection error) or none.
func (c *Client) answered(e *endpoint, ce *callError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ce == nil || ce.kind != kindConnect {
		e.refused, e.refusedSince = 0, time.Time{}
		return
	}
	if e.refused == 0 {
		e.refusedSince = c.now()
	}
	e.refused++
}

// refusing is how long every endpoint has refused every connection, when
// each has refused at least as many as one request's attempts over at
// least as long as one request's backoff waits (retrySpan): a server that
// is not there. Another request's connection error is then not retried,
// so a batch fails in the time one request takes instead of each request
// waiting out its own retries; the next attempt that gets an answer ends
// it. Zero otherwise.
func (c *Client) refusing() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	span := c.retrySpan()
	var d time.Duration
	for i, e := range c.eps {
		since := now.Sub(e.refusedSince)
		if e.refused < c.opts.Retries+1 || since < span {
			return 0
		}
		if i == 0 || since < d {
			d = since
		}
	}
	return d
}

// retrySpan is the least time the backoff waits of one request's retries
// add up to (each wait is at least half its step, see backoff).
func (c *Client) retrySpan() time.Duration {
	var span time.Duration
	d := c.opts.Backoff
	for range c.opts.Retries {
		span += min(d, c.opts.MaxBackoff) / 2
		if d < c.opts.MaxBackoff {
			d *= 2
		}
	}
	return max(span, time.Nanosecond)
}

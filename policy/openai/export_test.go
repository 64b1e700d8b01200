package openai

import (
	"context"
	"sync"
	"time"
)

// RecordWaits makes c's backoff waits return at once and returns a func
// that lists the waits asked for so far.
func RecordWaits(c *Client) func() []time.Duration {
	var mu sync.Mutex
	var waits []time.Duration
	c.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return ctx.Err()
	}
	return func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), waits...)
	}
}

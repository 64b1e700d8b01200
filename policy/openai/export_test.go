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

// FakeTime gives c a clock of its own that only its backoff waits move
// (call it after RecordWaits, whose waits return at once).
func FakeTime(c *Client) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	sleep := c.sleep
	c.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
		return sleep(ctx, d)
	}
}

// WeightsWaiting is the weights version a Generate or LoadWeights call
// waits to reload ("" when none waits), so a test can act once a reload
// is waiting for calls to drain.
func WeightsWaiting(c *Client) (string, bool) {
	c.weights.mu.Lock()
	defer c.weights.mu.Unlock()
	return c.weights.want, c.weights.waiting
}

// WeightsWaiters counts the calls blocked waiting for a weights version.
func WeightsWaiters(c *Client) int {
	c.weights.mu.Lock()
	defer c.weights.mu.Unlock()
	return c.weights.waiters
}

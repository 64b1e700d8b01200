package judge

import (
	"maps"
	"sync"
)

// Usage is what a Judge has done and spent since New.
type Usage struct {
	// Scores counts Score calls; ByStatus splits them by Result.Status
	// (replays included, errors under "error").
	Scores   int            `json:"scores"`
	ByStatus map[string]int `json:"by_status"`
	// Cached counts the Scores replayed from a memo, without a request.
	Cached int `json:"cached"`
	// Requests counts HTTP requests, Retries the ones that repeated a
	// failed request.
	Requests int `json:"requests"`
	Retries  int `json:"retries"`
	// TokensIn and TokensOut are the prompt and completion tokens of the
	// answered requests; Cost prices them with the Config's prices.
	TokensIn  int64   `json:"tokens_in"`
	TokensOut int64   `json:"tokens_out"`
	Cost      float64 `json:"cost"`
}

// counters accumulate a Usage under a lock.
type counters struct {
	mu sync.Mutex
	u  Usage
}

func (c *counters) request() { c.mu.Lock(); c.u.Requests++; c.mu.Unlock() }
func (c *counters) retry()   { c.mu.Lock(); c.u.Retries++; c.mu.Unlock() }

func (c *counters) spent(in, out int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.u.TokensIn += int64(in)
	c.u.TokensOut += int64(out)
}

func (c *counters) scored(r Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.u.Scores++
	if r.Cached {
		c.u.Cached++
	}
	if c.u.ByStatus == nil {
		c.u.ByStatus = map[string]int{}
	}
	c.u.ByStatus[r.Status]++
}

func (c *counters) snapshot() Usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.u
	u.ByStatus = maps.Clone(c.u.ByStatus)
	if u.ByStatus == nil {
		u.ByStatus = map[string]int{}
	}
	return u
}

package judge

import (
	"context"
	"time"
)

// SetSleep replaces the pause between retries, so tests can see the waits
// without waiting them.
func SetSleep(j *Judge, f func(ctx context.Context, d time.Duration) error) { j.sleep = f }

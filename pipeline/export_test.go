package pipeline

import "time"

// SetStagedReadWait shortens the wait between reads of a staged input
// that is not found, for tests; it returns the restore.
func SetStagedReadWait(d time.Duration) func() {
	old := stagedReadWait
	stagedReadWait = d
	return func() { stagedReadWait = old }
}

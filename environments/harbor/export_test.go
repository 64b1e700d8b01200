package harbor

import (
	"errors"
	"testing"
)

// RefuseLogsMount makes the verifier's tmpfs mount fail until t ends, as
// on a host that refuses mounting. Tests that call it do not run in
// parallel.
func RefuseLogsMount(t *testing.T) {
	old := mountLogs
	mountLogs = func(string, int64) error { return errors.New("mount: operation not permitted") }
	t.Cleanup(func() { mountLogs = old })
}

package supervisor

import (
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// A process Decide saw idle but that took an attempt before stop runs is
// not stopped: the attempt would be handed over and run again. (The pid
// is beyond any pid_max, so a signal sent by mistake reaches nobody; the
// stopping mark shows it.)
func TestStopSparesAProcessThatTookAnAttempt(t *testing.T) {
	const pid = 1 << 30
	now := time.Now()
	for _, tc := range []struct {
		name      string
		busy      int
		idleSince time.Time
		stopped   bool
	}{
		{"busy since the poll", 1, now.Add(-time.Hour), false},
		{"finished an attempt since the poll", 0, now.Add(time.Second), false},
		{"idle for the timeout", 0, now.Add(-time.Hour), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &supervisor{o: Options{IdleTimeout: time.Minute, Logger: zerolog.Nop()},
				procs: map[int]*proc{pid: {env: "sample", pid: pid, busy: tc.busy, idleSince: tc.idleSince}}}
			s.stop(pid, now)
			if got := s.procs[pid].stopping; got != tc.stopped {
				t.Errorf("stopping = %v, want %v (busy %d, idle since %v)", got, tc.stopped, tc.busy, tc.idleSince)
			}
		})
	}
}

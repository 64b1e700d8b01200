package supervisor_test

import (
	"fmt"
	"time"

	"github.com/rlpipe/rlpipe/pipeline/temporalrun/supervisor"
)

// Decide at three moments of a run whose generate environment runs 0 to
// 4 processes of 2 attempts each.
func ExampleDecide() {
	now := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	limits := supervisor.Limits{Min: 0, Max: 4}
	// Rollouts arrive: 5 tasks wait, nothing runs.
	fmt.Printf("%+v\n", supervisor.Decide(supervisor.State{Limits: limits, Backlog: 5, Capacity: 2, IdleTimeout: 30 * time.Second, Now: now}))
	// The last rollout runs on process 11; 12 and 13 have been idle 40 s.
	procs := []supervisor.Proc{
		{ID: 11, Busy: 1, IdleSince: now.Add(-time.Minute)},
		{ID: 12, IdleSince: now.Add(-40 * time.Second)},
		{ID: 13, IdleSince: now.Add(-40 * time.Second)},
	}
	fmt.Printf("%+v\n", supervisor.Decide(supervisor.State{Limits: limits, Capacity: 2, Procs: procs, IdleTimeout: 30 * time.Second, Now: now}))
	// The trainer updates: nothing waits or runs, process 11 idle 10 s.
	fmt.Printf("%+v\n", supervisor.Decide(supervisor.State{Limits: limits, Capacity: 2, Procs: []supervisor.Proc{{ID: 11, IdleSince: now.Add(-10 * time.Second)}}, IdleTimeout: 30 * time.Second, Now: now}))
	// Output:
	// {Start:3 Stop:[] Want:3}
	// {Start:0 Stop:[12 13] Want:1}
	// {Start:0 Stop:[] Want:0}
}

package supervisor

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrScaleSpec is a --scale value that does not parse.
var ErrScaleSpec = errors.New("bad scale")

// Limits bound the processes of one environment.
type Limits struct {
	Min, Max int
}

// ParseScale reads ENV=MIN:MAX items, each value a comma-separated list
// of them (the --scale flag): MIN from 0, MAX at least 1 and MIN.
func ParseScale(values []string) (map[string]Limits, error) {
	out := map[string]Limits{}
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			item = strings.TrimSpace(item)
			env, rng, ok := strings.Cut(item, "=")
			lo, hi, ok2 := strings.Cut(rng, ":")
			if !ok || !ok2 || env == "" {
				return nil, fmt.Errorf("%w %q: write ENV=MIN:MAX, e.g. generate=0:4", ErrScaleSpec, item)
			}
			minN, err1 := strconv.Atoi(lo)
			maxN, err2 := strconv.Atoi(hi)
			switch {
			case err1 != nil || err2 != nil:
				return nil, fmt.Errorf("%w %q: MIN and MAX must be whole numbers, e.g. %s=0:4", ErrScaleSpec, item, env)
			case minN < 0 || maxN < 1 || minN > maxN:
				return nil, fmt.Errorf("%w %q: need 0 <= MIN <= MAX and MAX >= 1", ErrScaleSpec, item)
			}
			if _, dup := out[env]; dup {
				return nil, fmt.Errorf("%w %q: environment %s is scaled twice", ErrScaleSpec, item, env)
			}
			out[env] = Limits{Min: minN, Max: maxN}
		}
	}
	return out, nil
}

// Proc is what Decide knows of one running process.
type Proc struct {
	// ID names the process (its pid).
	ID int
	// Busy is how many attempts it runs now.
	Busy int
	// IdleSince is when it last ran no attempt: when it started, or when
	// its last attempt ended.
	IdleSince time.Time
}

// State is one environment at one poll.
type State struct {
	Limits
	// Backlog is the number of tasks waiting on the queue.
	Backlog int
	// Capacity is how many attempts one process runs at once (at least 1).
	Capacity int
	// Procs are the processes running, not counting those being stopped.
	Procs []Proc
	// IdleTimeout is how long a process runs no attempt before it may stop.
	IdleTimeout time.Duration
	Now         time.Time
}

// Decision is what to do at one poll: start Start processes, or stop
// the processes Stop names.
type Decision struct {
	Start int
	Stop  []int
	// Want is the number of processes the backlog and attempts call for,
	// within the limits.
	Want int
}

// Decide turns an environment's state into a decision: enough processes
// for the tasks waiting and running, within the limits; a surplus process
// is stopped only once it has been idle for the idle timeout.
func Decide(s State) Decision {
	capacity := max(s.Capacity, 1)
	busy := 0
	for _, p := range s.Procs {
		busy += p.Busy
	}
	want := min(max((s.Backlog+busy+capacity-1)/capacity, s.Min), s.Max)
	d := Decision{Want: want}
	n := len(s.Procs)
	if want > n {
		d.Start = want - n
		return d
	}
	var idle []Proc
	for _, p := range s.Procs {
		if p.Busy == 0 && s.Now.Sub(p.IdleSince) >= s.IdleTimeout {
			idle = append(idle, p)
		}
	}
	slices.SortFunc(idle, func(a, b Proc) int {
		if c := a.IdleSince.Compare(b.IdleSince); c != 0 {
			return c
		}
		return a.ID - b.ID
	})
	for _, p := range idle[:min(len(idle), n-want)] {
		d.Stop = append(d.Stop, p.ID)
	}
	return d
}

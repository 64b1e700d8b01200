package supervisor_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/pipeline/temporalrun/supervisor"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	idle := func(id int, d time.Duration) supervisor.Proc { return supervisor.Proc{ID: id, IdleSince: ago(d)} }
	busy := func(id, n int) supervisor.Proc { return supervisor.Proc{ID: id, Busy: n, IdleSince: ago(time.Hour)} }
	for _, tc := range []struct {
		name string
		s    supervisor.State
		want supervisor.Decision
	}{
		{"nothing to do at zero", supervisor.State{Limits: supervisor.Limits{Min: 0, Max: 4}},
			supervisor.Decision{}},
		{"the minimum starts with no work", supervisor.State{Limits: supervisor.Limits{Min: 2, Max: 4}},
			supervisor.Decision{Start: 2, Want: 2}},
		{"work arrives: one process a task", supervisor.State{Limits: supervisor.Limits{Min: 0, Max: 4}, Backlog: 3},
			supervisor.Decision{Start: 3, Want: 3}},
		{"capacity packs tasks into processes, rounding up", supervisor.State{Limits: supervisor.Limits{Min: 0, Max: 4}, Backlog: 5, Capacity: 2},
			supervisor.Decision{Start: 3, Want: 3}},
		{"never above the maximum", supervisor.State{Limits: supervisor.Limits{Min: 0, Max: 4}, Backlog: 100, Procs: []supervisor.Proc{busy(1, 1)}},
			supervisor.Decision{Start: 3, Want: 4}},
		{"running attempts count with the backlog", supervisor.State{Limits: supervisor.Limits{Min: 0, Max: 4}, Backlog: 1, Procs: []supervisor.Proc{busy(1, 1), busy(2, 1)}},
			supervisor.Decision{Start: 1, Want: 3}},
		{"enough processes: nothing", supervisor.State{Limits: supervisor.Limits{Min: 0, Max: 4}, Backlog: 1, Procs: []supervisor.Proc{busy(1, 1), idle(2, 0)}, IdleTimeout: time.Second},
			supervisor.Decision{Want: 2}},
		{"a surplus process not idle long enough stays", supervisor.State{Limits: supervisor.Limits{Min: 0, Max: 4}, Procs: []supervisor.Proc{idle(1, 500*time.Millisecond)}, IdleTimeout: time.Second},
			supervisor.Decision{}},
		{"a surplus process idle for the timeout stops", supervisor.State{Limits: supervisor.Limits{Min: 0, Max: 4}, Procs: []supervisor.Proc{idle(1, time.Second)}, IdleTimeout: time.Second},
			supervisor.Decision{Stop: []int{1}}},
		{"a busy process never stops, even over the maximum", supervisor.State{Limits: supervisor.Limits{Min: 0, Max: 1}, Procs: []supervisor.Proc{busy(1, 1), busy(2, 1)}, IdleTimeout: time.Second},
			supervisor.Decision{Want: 1}},
		{"the longest idle stops first, down to the minimum", supervisor.State{Limits: supervisor.Limits{Min: 1, Max: 4},
			Procs: []supervisor.Proc{idle(1, 2*time.Second), idle(2, 9*time.Second), idle(3, 5*time.Second)}, IdleTimeout: time.Second},
			supervisor.Decision{Stop: []int{2, 3}, Want: 1}},
		{"equal idle times stop the lowest id first", supervisor.State{Limits: supervisor.Limits{Min: 0, Max: 4},
			Procs: []supervisor.Proc{idle(7, time.Minute), idle(3, time.Minute), busy(5, 1)}, IdleTimeout: time.Second},
			supervisor.Decision{Stop: []int{3, 7}, Want: 1}},
		{"a trainer between updates stops to zero", supervisor.State{Limits: supervisor.Limits{Min: 0, Max: 1}, Capacity: 1,
			Procs: []supervisor.Proc{idle(4, time.Minute)}, IdleTimeout: 30 * time.Second},
			supervisor.Decision{Stop: []int{4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.s.Now = now
			if got := supervisor.Decide(tc.s); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseScale(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		want   map[string]supervisor.Limits
		err    string
	}{
		{"one", []string{"generate=0:4"}, map[string]supervisor.Limits{"generate": {0, 4}}, ""},
		{"a list and a repeat", []string{"generate=1:4, reward=0:2", "train=0:1"},
			map[string]supervisor.Limits{"generate": {1, 4}, "reward": {0, 2}, "train": {0, 1}}, ""},
		{"no range", []string{"generate"}, nil, `bad scale "generate": write ENV=MIN:MAX, e.g. generate=0:4`},
		{"no colon", []string{"generate=4"}, nil, `bad scale "generate=4": write ENV=MIN:MAX, e.g. generate=0:4`},
		{"no env", []string{"=0:4"}, nil, `bad scale "=0:4": write ENV=MIN:MAX, e.g. generate=0:4`},
		{"not numbers", []string{"train=one:two"}, nil, `bad scale "train=one:two": MIN and MAX must be whole numbers, e.g. train=0:4`},
		{"min above max", []string{"train=3:1"}, nil, `bad scale "train=3:1": need 0 <= MIN <= MAX and MAX >= 1`},
		{"max zero", []string{"train=0:0"}, nil, `bad scale "train=0:0": need 0 <= MIN <= MAX and MAX >= 1`},
		{"negative min", []string{"train=-1:2"}, nil, `bad scale "train=-1:2": need 0 <= MIN <= MAX and MAX >= 1`},
		{"twice", []string{"train=0:1", "train=0:2"}, nil, `bad scale "train=0:2": environment train is scaled twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := supervisor.ParseScale(tc.values)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err || !errors.Is(err, supervisor.ErrScaleSpec) {
					t.Fatalf("err %v, want %q wrapping ErrScaleSpec", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseScale = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

package trackertest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/trackers"
)

// Backend is a tracker backend under test.
type Backend struct {
	// Open returns a new tracker of the backend. Every tracker it returns
	// records to the same place (a directory, a server's experiment): a
	// second one started for a run is the resumed run's.
	Open func(t *testing.T) trackers.Tracker
	// Read reads back what the backend holds of run, with the tracker's
	// own reader.
	Read func(t *testing.T, run string) Record
	// Statuses says the backend records how a run ended (MLflow does,
	// TensorBoard does not): the suite checks Record.Status and EndTime
	// only then.
	Statuses bool
}

// Record is what a backend holds of one rlpipe run.
type Record struct {
	// Runs counts the tracker's runs recorded for the rlpipe run: MLflow
	// runs with its tag, 1 for a TensorBoard directory, 0 for none.
	Runs int
	// Status is how the tracker's run stands: Running while it is open,
	// else Finished, Failed or Killed. EndTime is when it ended (zero
	// while open).
	Status  trackers.Status
	EndTime time.Time
	// Steps are the steps of the scalar TagLoss, in step order, as the
	// tracker's reader shows them.
	Steps []int
}

// TagLoss is the scalar the suite logs at every step.
const TagLoss = "train/loss"

// t0 is the time of the suite's first point; end times are after it.
var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// point is the suite's point at step n.
func point(n int) trackers.Point {
	return trackers.Point{Step: n, Time: t0.Add(time.Duration(n) * time.Minute),
		Scalars: map[string]float64{TagLoss: 1 / float64(n+1)}, Text: map[string]string{trackers.TagCommit: fmt.Sprintf("c%d", n)}}
}

// at is an end time: minute n after t0.
func at(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }

// Run checks a tracker backend: each behaviour of the package doc in a
// subtest with a fresh backend from newBackend.
func Run(t *testing.T, newBackend func(t *testing.T) Backend) {
	t.Run("Ends", func(t *testing.T) {
		for _, s := range []trackers.Status{trackers.Finished, trackers.Failed, trackers.Killed} {
			t.Run(s.String(), func(t *testing.T) {
				b := newBackend(t)
				name := "ends-" + s.String()
				tr := started(t, b, name)
				logged(t, tr, 1, 2)
				ended(t, tr, trackers.Outcome{Status: s, Time: at(3)})
				check(t, b, name, Record{Runs: 1, Status: s, EndTime: at(3), Steps: []int{1, 2}})
			})
		}
	})
	t.Run("Running", func(t *testing.T) {
		b := newBackend(t)
		tr := started(t, b, "running")
		logged(t, tr, 1)
		ended(t, tr, trackers.Outcome{Status: trackers.Running, Time: at(3)})
		check(t, b, "running", Record{Runs: 1, Status: trackers.Running, Steps: []int{1}})
	})
	t.Run("Resumes", func(t *testing.T) {
		b := newBackend(t)
		first := started(t, b, "resumes")
		logged(t, first, 1)
		ended(t, first, trackers.Outcome{Status: trackers.Killed, Time: at(2)})
		check(t, b, "resumes", Record{Runs: 1, Status: trackers.Killed, EndTime: at(2), Steps: []int{1}})
		second := started(t, b, "resumes")
		if b.Statuses {
			// Open again; MLflow keeps the earlier end time until the
			// run ends again, as its own clients do when they resume.
			if got := b.Read(t, "resumes"); got.Runs != 1 || got.Status != trackers.Running {
				t.Errorf("the resumed run: %d runs, %v; want 1 run, running", got.Runs, got.Status)
			}
		}
		logged(t, second, 2)
		ended(t, second, trackers.Outcome{Status: trackers.Finished, Time: at(5)})
		check(t, b, "resumes", Record{Runs: 1, Status: trackers.Finished, EndTime: at(5), Steps: []int{1, 2}})
	})
	t.Run("Stopped", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			before trackers.Status
			want   Record
		}{
			{"after-killed", trackers.Killed, Record{Runs: 1, Status: trackers.Killed, EndTime: at(2), Steps: []int{1}}},
			{"after-failed", trackers.Failed, Record{Runs: 1, Status: trackers.Failed, EndTime: at(2), Steps: []int{1}}},
			{"after-running", trackers.Running, Record{Runs: 1, Status: trackers.Failed, EndTime: at(4), Steps: []int{1}}},
			{"after-finished", trackers.Finished, Record{Runs: 1, Status: trackers.Failed, EndTime: at(4), Steps: []int{1}}},
		} {
			t.Run(c.name, func(t *testing.T) {
				b := newBackend(t)
				name := "stopped-" + c.name
				live := started(t, b, name)
				logged(t, live, 1)
				ended(t, live, trackers.Outcome{Status: c.before, Time: at(2)})
				// The back-fill: the same point again, then Stopped.
				back := started(t, b, name)
				logged(t, back, 1)
				ended(t, back, trackers.Outcome{Status: trackers.Stopped, Time: at(4)})
				check(t, b, name, c.want)
			})
		}
	})
	t.Run("WithoutStart", func(t *testing.T) {
		b := newBackend(t)
		ended(t, b.Open(t), trackers.Outcome{Status: trackers.Finished, Time: at(1)})
		if got := b.Read(t, "never"); got.Runs != 0 {
			t.Errorf("End without Start recorded %d runs", got.Runs)
		}
	})
}

// started is a new tracker of b, started for run name.
func started(t *testing.T, b Backend, name string) trackers.Tracker {
	t.Helper()
	tr := b.Open(t)
	if err := tr.Start(context.Background(), trackers.Run{Name: name, Params: map[string]string{"iterations": "2"}}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return tr
}

// logged logs the suite's points at steps to tr.
func logged(t *testing.T, tr trackers.Tracker, steps ...int) {
	t.Helper()
	var ps []trackers.Point
	for _, n := range steps {
		ps = append(ps, point(n))
	}
	if err := tr.Log(context.Background(), ps); err != nil {
		t.Fatalf("Log: %v", err)
	}
}

func ended(t *testing.T, tr trackers.Tracker, o trackers.Outcome) {
	t.Helper()
	if err := tr.End(context.Background(), o); err != nil {
		t.Fatalf("End(%v): %v", o.Status, err)
	}
}

// check compares what b holds of run name with want; Status and EndTime
// only for a backend that records them.
func check(t *testing.T, b Backend, name string, want Record) {
	t.Helper()
	got := b.Read(t, name)
	if got.Runs != want.Runs || !slices.Equal(got.Steps, want.Steps) {
		t.Errorf("run %s: %d runs, steps %v; want %d, %v", name, got.Runs, got.Steps, want.Runs, want.Steps)
	}
	if !b.Statuses {
		return
	}
	if got.Status != want.Status || !got.EndTime.Equal(want.EndTime) {
		t.Errorf("run %s: %v, ended %v; want %v, ended %v", name, got.Status, got.EndTime, want.Status, want.EndTime)
	}
}

package trackertest_test

import (
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/trackers"
	"github.com/rlpipe/rlpipe/trackers/trackertest"
)

// A backend's package runs the suite from a test of its own; here MLflow
// against a real server, read back through its REST API (the trackers
// package's TestMLflow gives each backend an experiment of its own).
func ExampleRun() {
	_ = func(t *testing.T) { // func TestConformance(t *testing.T)
		uri := trackertest.MLflowServer(t)
		trackertest.Run(t, func(t *testing.T) trackertest.Backend {
			exp := "suite-" + t.Name()
			return trackertest.Backend{
				Statuses: true,
				Open: func(t *testing.T) trackers.Tracker {
					tr, err := trackers.Open(trackers.MLflowBackend, &trackers.MLflowOptions{URI: uri, Experiment: exp})
					if err != nil {
						t.Fatal(err)
					}
					return tr
				},
				Read: func(t *testing.T, run string) trackertest.Record {
					found := trackertest.MLflowRuns(t, uri, exp, run)
					if len(found) != 1 {
						return trackertest.Record{Runs: len(found)}
					}
					r := trackertest.Record{Runs: 1, Status: found[0].Outcome(),
						Steps: trackertest.MLflowSteps(t, uri, found[0].ID, trackertest.TagLoss)}
					if found[0].EndTime != 0 {
						r.EndTime = time.UnixMilli(found[0].EndTime).UTC()
					}
					return r
				},
			}
		})
	}
}

package pipeline_test

import (
	"slices"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/pipeline"
)

// TestParseEventLog: the events with a time, in the log's order, and
// their span; a torn or foreign line and an event without a time are
// passed over.
func TestParseEventLog(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name   string
		log    string
		tasks  []string
		t0, t1 string
	}{
		{"empty", "", nil, "", ""},
		{"in order", `{"time":"2026-12-07T01:00:00.5Z","kind":"started","task":"a"}` + "\n" + `{"time":"2026-12-07T01:00:02.25Z","kind":"finished","task":"a"}` + "\n",
			[]string{"a", "a"}, "2026-12-07T01:00:00.5Z", "2026-12-07T01:00:02.25Z"},
		{"out of order", `{"time":"2026-12-07T01:00:03Z","kind":"finished","task":"b"}` + "\n" + `{"time":"2026-12-07T01:00:01Z","kind":"started","task":"a"}`,
			[]string{"b", "a"}, "2026-12-07T01:00:01Z", "2026-12-07T01:00:03Z"},
		{"torn, foreign and timeless lines", `{"time":"2026-12-07T01:00:01Z","kind":"started","task":"a"}` + "\n" + `{"time":"2026-12-07T01:` + "\n" + `not json` + "\n" + `{"kind":"started","task":"c"}` + "\n",
			[]string{"a"}, "2026-12-07T01:00:01Z", "2026-12-07T01:00:01Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, t0, t1 := pipeline.ParseEventLog([]byte(tc.log))
			var tasks []string
			for _, e := range evs {
				tasks = append(tasks, e.Task)
			}
			if !slices.Equal(tasks, tc.tasks) {
				t.Fatalf("tasks %v, want %v", tasks, tc.tasks)
			}
			if tc.t0 == "" {
				if !t0.IsZero() || !t1.IsZero() {
					t.Fatalf("span %v..%v, want zero", t0, t1)
				}
				return
			}
			if !t0.Equal(at(tc.t0)) || !t1.Equal(at(tc.t1)) {
				t.Fatalf("span %v..%v, want %s..%s", t0, t1, tc.t0, tc.t1)
			}
		})
	}
}

package executortest

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlpipe/rlpipe/pipeline"
)

var retryScenarios = []scenario{
	{Name: "Transient", Run: testTransient},
	{Name: "Permanent", Run: testPermanent},
	{Name: "Exhausted", Run: testExhausted},
}

// testTransient: a task that fails twice and then works, allowed three
// attempts, succeeds on the third, and its output is the third's.
func testTransient(x subject) {
	t := x.t
	var s seen
	task := outTask("flaky", retrying(3), func(ctx context.Context, tc *pipeline.TaskContext) error {
		if n := s.add(tc); n < 3 {
			return fmt.Errorf("transient failure %d", n)
		}
		return write(tc, "out", "ok flaky")
	})
	f, n, err := callAlone(x, "retries-transient", task)
	if err != nil {
		t.Fatalf("call flaky: %v", err)
	}
	s.want(t, "flaky", 1, 2, 3)
	f.wantEvents(n, "flaky", ended{retried: []string{"transient failure 1", "transient failure 2"}, end: pipeline.EventFinished, attempts: 3})
	a, err := n.Result("out")
	if err != nil {
		t.Fatalf("result of flaky: %v", err)
	}
	if got, _ := f.readObject(a.Ref, a.Path); got != "ok flaky" {
		t.Fatalf("flaky's output %s:%s holds %q, want %q", a.Ref, a.Path, got, "ok flaky")
	}
}

// testPermanent: a Permanent error ends the call after one attempt
// although three are allowed.
func testPermanent(x subject) {
	t := x.t
	var s seen
	task := outTask("permanent", retrying(3), func(ctx context.Context, tc *pipeline.TaskContext) error {
		s.add(tc)
		return pipeline.Permanent(errors.New("bad prompt file row 3"))
	})
	f, n, err := callAlone(x, "retries-permanent", task)
	wantFailure(t, "permanent", err, failure{attempts: 1, permanent: true, msg: "bad prompt file row 3"})
	s.want(t, "permanent", 1)
	f.wantEvents(n, "permanent", ended{end: pipeline.EventFailed, attempts: 1})
}

// testExhausted: a task that always fails, allowed two attempts, fails
// with the second attempt's error; the failure is not Permanent.
func testExhausted(x subject) {
	t := x.t
	var s seen
	task := outTask("exhausted", retrying(2), func(ctx context.Context, tc *pipeline.TaskContext) error {
		return fmt.Errorf("still down (attempt %d)", s.add(tc))
	})
	f, n, err := callAlone(x, "retries-exhausted", task)
	wantFailure(t, "exhausted", err, failure{attempts: 2, msg: "still down (attempt 2)"})
	s.want(t, "exhausted", 1, 2)
	f.wantEvents(n, "exhausted", ended{retried: []string{"still down (attempt 1)"}, end: pipeline.EventFailed, attempts: 2})
}

package executortest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/pipeline"
)

var timeoutScenarios = []scenario{
	{Name: "PerAttempt", Run: testPerAttemptTimeout},
	{Name: "DeadlineWhileRunning", Run: testDeadlineWhileRunning},
	{Name: "DeadlineWhileWaiting", Run: testDeadlineWhileWaiting},
}

var cancelScenarios = []scenario{
	{Name: "RunContext", Run: testCancelRunContext},
}

// testPerAttemptTimeout: a body that never returns on its own is stopped
// at the per-attempt timeout, each of its two attempts, and the call
// fails with ErrTimeout, not Permanent.
func testPerAttemptTimeout(x subject) {
	t := x.t
	var s seen
	settings := retrying(2)
	settings.Timeout = attemptTimeout
	task := outTask("slow", settings, func(ctx context.Context, tc *pipeline.TaskContext) error {
		s.add(tc)
		<-ctx.Done()
		return ctx.Err()
	})
	f, n, err := callAlone(x, "timeouts-per-attempt", task)
	wantFailure(t, "slow", err, failure{attempts: 2, is: []error{pipeline.ErrTimeout},
		msg: fmt.Sprintf("attempt timed out after %s (attempt 2", attemptTimeout)})
	s.want(t, "slow", 1, 2)
	f.wantEvents(n, "slow", ended{retried: []string{"attempt timed out after " + attemptTimeout.String() + " (attempt 1"}, end: pipeline.EventFailed, attempts: 2})
}

// testDeadlineWhileRunning: the first attempt fails at once; the second
// runs until the deadline over all attempts stops it. The call fails
// with ErrDeadline after exactly two attempts, although fifty are
// allowed, and the first attempt's retry is reported.
func testDeadlineWhileRunning(x subject) {
	t := x.t
	var s seen
	settings := retrying(50)
	settings.Deadline = deadline
	task := outTask("late", settings, func(ctx context.Context, tc *pipeline.TaskContext) error {
		if s.add(tc) == 1 {
			return errors.New("first attempt fails")
		}
		<-ctx.Done()
		return ctx.Err()
	})
	f, n, err := callAlone(x, "timeouts-deadline-running", task)
	wantFailure(t, "late", err, failure{attempts: 2, is: []error{pipeline.ErrDeadline},
		msg: fmt.Sprintf("task deadline passed (%s over all attempts)", deadline)})
	s.want(t, "late", 1, 2)
	f.wantEvents(n, "late", ended{retried: []string{"first attempt fails"}, end: pipeline.EventFailed, attempts: 2})
}

// testDeadlineWhileWaiting: the first attempt fails and the pause before
// the second is longer than the deadline: the call fails with
// ErrDeadline after one attempt, naming the attempt's error.
func testDeadlineWhileWaiting(x subject) {
	t := x.t
	var s seen
	settings := pipeline.Settings{Deadline: deadline, Retry: pipeline.Retry{Attempts: 50, Backoff: time.Hour, Factor: 1}}
	task := outTask("patient", settings, func(ctx context.Context, tc *pipeline.TaskContext) error {
		s.add(tc)
		return errors.New("no luck yet")
	})
	f, n, err := callAlone(x, "timeouts-deadline-waiting", task)
	wantFailure(t, "patient", err, failure{attempts: 1, is: []error{pipeline.ErrDeadline},
		msg: fmt.Sprintf("task deadline passed (%s over all attempts)", deadline)})
	if !strings.Contains(err.Error(), "no luck yet") {
		t.Fatalf("call patient: error %q does not name the last attempt's error %q", err, "no luck yet")
	}
	s.want(t, "patient", 1)
	// Either reading is right: the local executor reports the retry it
	// starts waiting for and fails when the deadline cuts the wait short;
	// the Temporal executor sees before waiting that the pause overshoots
	// the deadline and fails at once, without a retry.
	evs := f.callEvents("patient")
	waited := ended{retried: []string{"no luck yet"}, end: pipeline.EventFailed, attempts: 1}
	gaveUp := ended{end: pipeline.EventFailed, attempts: 1}
	if err1 := waited.check(n, "patient", evs); err1 != nil {
		if err2 := gaveUp.check(n, "patient", evs); err2 != nil {
			t.Fatalf("call patient: %v; or, for an executor that does not wait: %v", err1, err2)
		}
	}
}

// testCancelRunContext: cancelling the context of a call while its
// attempt runs cancels the attempt's context wherever it runs, and the
// call ends with context.Canceled: no retry although three attempts are
// allowed, and neither a finished nor a failed event.
func testCancelRunContext(x subject) {
	t := x.t
	var s seen
	started, stopped := make(chan struct{}), make(chan struct{})
	task := outTask("wait", retrying(3), func(ctx context.Context, tc *pipeline.TaskContext) error {
		if s.add(tc) > 1 {
			return errors.New("a cancelled call was retried")
		}
		close(started)
		<-ctx.Done()
		close(stopped)
		return ctx.Err()
	})
	f := open(x, "cancel-run-context", task)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	n := f.run.Iteration(1).Go(ctx, task, pipeline.Call{})
	waitFor(t, started, "the attempt to start")
	cancel()
	wctx, wcancel := context.WithTimeout(f.ctx, waitLimit)
	defer wcancel()
	err := n.Wait(wctx)
	if wctx.Err() != nil {
		t.Fatalf("call wait did not end within %s of its cancellation", waitLimit)
	}
	if !errors.Is(err, context.Canceled) || errors.Is(err, pipeline.ErrPermanent) {
		t.Fatalf("call wait: %v, want context.Canceled", err)
	}
	waitFor(t, stopped, "the attempt's context to be cancelled")
	s.want(t, "wait", 1)
	f.wantEvents(n, "wait", ended{})
}

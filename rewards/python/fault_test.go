package python_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/rewards/python"
)

// A batch that kills the worker — out of memory, an exit, a segfault —
// gives that batch's rows status "error" saying how, and the next batch
// is scored by a restarted worker, never an error for the caller.
// (TestHangRestartsTheWorker is the hang.)
func TestDeadWorkerRestarts(t *testing.T) {
	for _, c := range []struct {
		name, fn string
		batch    []any
		reason   string
	}{
		{"out of memory", "hog", texts("a", "b"),
			"function hog: the worker ended: out of memory (memory limit 512 MiB); restarted"},
		{"exit", "exits_on_exit", texts("a", "exit", "c"),
			"function exits_on_exit: the worker ended: failed (exit code 3); restarted"},
		{"segfault", "segfaults_on_crash", texts("crash", "b"),
			"function segfaults_on_crash: the worker ended: signal (SIGSEGV); restarted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := start(t, 20*time.Second, c.fn, "length")
			got, err := w.Score(context.Background(), c.fn, python.Batch{Completions: c.batch})
			if err != nil {
				t.Fatal(err)
			}
			want := make([]python.Result, len(c.batch))
			for i := range want {
				want[i] = failed("error", c.reason)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("the batch that killed the worker: got %+v\nwant %+v", got, want)
			}
			got, err = w.Score(context.Background(), "length", python.Batch{Completions: texts("abc")})
			if err != nil || !reflect.DeepEqual(got, []python.Result{ok(3)}) {
				t.Fatalf("the next batch: %+v, %v", got, err)
			}
			if w.Starts() != 2 {
				t.Fatalf("the worker started %d times, want 2", w.Starts())
			}
		})
	}
}

// A batch whose ctx ends is an error for the caller, and kills the
// worker (its late answer would belong to that batch); the next batch
// starts a new one and is scored, never marked as the dead worker's.
func TestCanceledBatchLeavesTheNextScored(t *testing.T) {
	w := start(t, 20*time.Second, "hangs_on_hang")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	if got, err := w.Score(ctx, "hangs_on_hang", python.Batch{Completions: texts("hang")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("the canceled batch: %+v, %v; want context.Canceled", got, err)
	}
	got, err := w.Score(context.Background(), "hangs_on_hang", python.Batch{Completions: texts("a", "b")})
	if err != nil || !reflect.DeepEqual(got, []python.Result{ok(1), ok(1)}) {
		t.Fatalf("the next batch: %+v, %v", got, err)
	}
	if w.Starts() != 2 {
		t.Fatalf("the worker started %d times, want 2", w.Starts())
	}
}

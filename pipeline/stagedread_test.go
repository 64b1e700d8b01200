package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// missing answers "not found" for the first misses reads of each object
// whose path has the suffix, as lakeFS does for a branch's staged objects
// while a commit of that branch lands.
type missing struct {
	artifacts.Store
	suffix string
	misses int

	mu    sync.Mutex
	reads map[string]int
}

func (m *missing) GetObject(ctx context.Context, ref, path string) (io.ReadCloser, artifacts.ObjectInfo, error) {
	if strings.HasSuffix(path, m.suffix) {
		m.mu.Lock()
		m.reads[path]++
		n := m.reads[path]
		m.mu.Unlock()
		if n <= m.misses {
			return nil, artifacts.ObjectInfo{}, fmt.Errorf("store: get %s:%s: %w", ref, path, artifacts.ErrNotFound)
		}
	}
	return m.Store.GetObject(ctx, ref, path)
}

func (m *missing) readsOf(suffix string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	total := 0
	for p, n := range m.reads {
		if strings.HasSuffix(p, suffix) {
			total += n
		}
	}
	return total
}

// A staged input that a read misses (a commit in flight) is read again
// until it is there: the consumer runs once, in one attempt, and sees the
// producer's bytes.
func TestStagedInputReadRacingACommitIsReadAgain(t *testing.T) {
	defer pipeline.SetStagedReadWait(time.Millisecond)()
	ctx := context.Background()
	st := &missing{Store: standintest.NewStore(t, 0), suffix: "a.txt", misses: 3, reads: map[string]int{}}
	var ra, rb atomic.Int32
	a, b := writeTask("a", &ra), writeTask("b", &rb)
	r := openRun(t, st, pipeline.RunOptions{})
	it := r.Iteration(1)
	na := it.Go(ctx, a, pipeline.Call{Params: map[string]string{"text": "A"}})
	nb := it.Go(ctx, b, pipeline.Call{Params: map[string]string{"text": "B"}, Inputs: map[string]pipeline.Artifact{"in": na.Output("out")}})
	if err := nb.Wait(ctx); err != nil {
		t.Fatalf("the consumer failed: %v", err)
	}
	if ra.Load() != 1 || rb.Load() != 1 {
		t.Errorf("runs: a %d, b %d; want 1 each (the miss is not a task failure)", ra.Load(), rb.Load())
	}
	if got := st.readsOf("a.txt"); got != 4 {
		t.Errorf("reads of a.txt = %d, want 4 (3 misses, then the object)", got)
	}
	out, err := nb.Result("out")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, st, out.Ref, out.Path); got != "A+B" {
		t.Errorf("b wrote %q, want A+B", got)
	}
}

// A staged input that stays missing fails after the bounded reads, saying
// so; an input the engine did not stage (the dataset) fails on the first
// miss (here the engine's stat of it, before any read).
func TestMissingInputsFailClearly(t *testing.T) {
	defer pipeline.SetStagedReadWait(time.Millisecond)()
	ctx := context.Background()
	st := &missing{Store: standintest.NewStore(t, 0), suffix: ".txt", misses: 1 << 30, reads: map[string]int{}}
	var ra, rb atomic.Int32
	a, b := writeTask("a", &ra), writeTask("b", &rb)
	r := openRun(t, st, pipeline.RunOptions{})
	it := r.Iteration(1)
	na := it.Go(ctx, a, pipeline.Call{Params: map[string]string{"text": "A"}})
	err := it.Go(ctx, b, pipeline.Call{Inputs: map[string]pipeline.Artifact{"in": na.Output("out")}}).Wait(ctx)
	if !errors.Is(err, artifacts.ErrNotFound) || !strings.Contains(err.Error(), "still missing after 8 reads") {
		t.Fatalf("err = %v, want not found after 8 reads", err)
	}
	if rb.Load() != 0 {
		t.Errorf("b ran %d times without its input", rb.Load())
	}
	err = r.Iteration(2).Go(ctx, b, pipeline.Call{Inputs: map[string]pipeline.Artifact{"in": pipeline.StoreArtifact("main", "data.txt")}}).Wait(ctx)
	if !errors.Is(err, artifacts.ErrNotFound) || strings.Contains(err.Error(), "still missing") {
		t.Fatalf("err = %v, want a plain not found", err)
	}
}

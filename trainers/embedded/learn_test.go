package embedded_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/embedded"
)

// trainedPass1 runs the loop for iterations of batch prompts × 8 samples
// and returns the exact expected pass@1 on HeldOutProblems(evalN) of the
// base model and of the last adapter.
func trainedPass1(t testing.TB, o embedded.Options, iterations, batch, evalN int) (base, trained float64, elapsed time.Duration) {
	t.Helper()
	ctx := context.Background()
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t, iterations*batch)
	r := openRun(t, st, "learn", 1)
	start := time.Now()
	state, err := r.Loop(ctx, loopConfig(iterations, batch), stages(t, m, embedded.Task(m, o)))
	if err != nil {
		t.Fatal(err)
	}
	elapsed = time.Since(start)
	if testing.Verbose() {
		for _, n := range []int{1, iterations / 2, iterations} {
			t.Logf("iteration %d: %s", n, readObject(t, st, r.Branch(), fmt.Sprintf("events/%06d.metrics.json", n)))
		}
	}
	problems := tiny.HeldOutProblems(evalN)
	if base, err = m.ExpectedPass1(ctx, nil, problems); err != nil {
		t.Fatal(err)
	}
	a, err := m.LoadAdapter(fetchDir(t, st, r.Branch(), state.Adapters[strconv.Itoa(iterations)]))
	if err != nil {
		t.Fatal(err)
	}
	if trained, err = m.ExpectedPass1(ctx, a, problems); err != nil {
		t.Fatal(err)
	}
	return base, trained, elapsed
}

// TestExplore runs the loop with the options of the environment
// (RLPIPE_LR, RLPIPE_ITERS, RLPIPE_BATCH, RLPIPE_BETA, RLPIPE_KEEP0):
// the exploration behind the defaults and the demo's figures.
func TestExplore(t *testing.T) {
	if os.Getenv("RLPIPE_SLOW") == "" {
		t.Skip("set RLPIPE_SLOW=1")
	}
	num := func(k string, d float64) float64 {
		if v, err := strconv.ParseFloat(os.Getenv(k), 64); err == nil {
			return v
		}
		return d
	}
	o := embedded.Options{LR: num("RLPIPE_LR", 2e-3), Beta: num("RLPIPE_BETA", 0), KeepZeroStd: os.Getenv("RLPIPE_KEEP0") != ""}
	iters, batch := int(num("RLPIPE_ITERS", 50)), int(num("RLPIPE_BATCH", 16))
	base, trained, el := trainedPass1(t, o, iters, batch, 500)
	fmt.Printf("lr %g beta %g keep0 %v iters %d batch %d: base %.4f trained %.4f (+%.2f points) in %.1fs\n",
		o.LR, o.Beta, o.KeepZeroStd, iters, batch, base, trained, 100*(trained-base), el.Seconds())
}

var _ = pipeline.OutAdapter

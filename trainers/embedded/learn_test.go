package embedded_test

import (
	"cmp"
	"context"
	"fmt"
	"github.com/rlpipe/rlpipe/trainers/grpo"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/embedded"
)

// TestLearns: 20 iterations of 16 prompts × 8 samples with the default
// options raise the exact expected pass@1 on 200 held-out problems. The
// run is deterministic, so the figures are exact.
func TestLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("the learning test trains for 20 iterations")
	}
	const iterations = 20
	base, curve, _ := learningCurve(t, embedded.Options{}, 1, 16, []int{10, iterations}, 200)
	t.Logf("exact expected pass@1 on 200 held-out problems: base %.4f, after 10 iterations %.4f, after %d %.4f", base, curve[0], iterations, curve[1])
	want := []float64{wantBase, want10, want20}
	for i, got := range []float64{base, curve[0], curve[1]} {
		if math.Abs(got-want[i]) > 1e-9 {
			t.Errorf("pass@1 figure %d is %.12f, want %.12f", i, got, want[i])
		}
	}
	if !(curve[0] > base && curve[1] > curve[0]) {
		t.Errorf("pass@1 %.4f → %.4f → %.4f does not rise", base, curve[0], curve[1])
	}
}

// The figures of TestLearns: +37.29 points in 20 iterations.
const (
	wantBase = 0.329479498147
	want10   = 0.654222575089
	want20   = 0.702357516366
)

// TestExplore runs the loop with the options of the environment
// (RLPIPE_LR, RLPIPE_ITERS, RLPIPE_BATCH, RLPIPE_BETA, RLPIPE_KL,
// RLPIPE_ENT, RLPIPE_KEEP0, RLPIPE_SEEDS=1,2,3) and prints the exact expected pass@1 on 500 held-out
// problems along the way: the exploration behind the defaults and the
// demo's figures.
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
	o := embedded.Options{LR: num("RLPIPE_LR", 2e-3), Beta: num("RLPIPE_BETA", 0), KeepZeroStd: os.Getenv("RLPIPE_KEEP0") != "",
		Aggregation: grpo.Aggregation(os.Getenv("RLPIPE_AGG")), NoStd: os.Getenv("RLPIPE_NOSTD") != "",
		KLEstimator: grpo.KLEstimator(os.Getenv("RLPIPE_KL")), EntropyCoeff: num("RLPIPE_ENT", 0)}
	iters, batch := int(num("RLPIPE_ITERS", 50)), int(num("RLPIPE_BATCH", 16))
	seeds := strings.Split(cmp.Or(os.Getenv("RLPIPE_SEEDS"), "1"), ",")
	var marks []int
	for _, k := range []int{10, 20, 30, 40, 50, 75, 100, 150, 200, 300, 400, 500} {
		if k < iters {
			marks = append(marks, k)
		}
	}
	marks = append(marks, iters)
	for _, s := range seeds {
		seed, _ := strconv.ParseUint(s, 10, 64)
		base, curve, el := learningCurve(t, o, seed, batch, marks, 500)
		var b strings.Builder
		for i, k := range marks {
			fmt.Fprintf(&b, " %d:%+.2f", k, 100*(curve[i]-base))
		}
		fmt.Printf("lr %g beta %g kl %q entropy %g keep0 %v agg %q nostd %v batch %d seed %d: base %.4f final %.4f (%+.2f points) in %.1fs; points by iteration:%s\n",
			o.LR, o.Beta, o.KLEstimator, o.EntropyCoeff, o.KeepZeroStd, o.Aggregation, o.NoStd, batch, seed, base, curve[len(curve)-1], 100*(curve[len(curve)-1]-base), el.Seconds(), b.String())
	}
}

// learningCurve runs the loop with run seed seed for the last of marks
// iterations and returns the exact expected pass@1 on
// HeldOutProblems(evalN) of the base model and of the adapter after each
// mark, and the loop's time.
func learningCurve(t testing.TB, o embedded.Options, seed uint64, batch int, marks []int, evalN int) (base float64, curve []float64, elapsed time.Duration) {
	t.Helper()
	ctx := context.Background()
	m := embeddedModel(t)
	iterations := marks[len(marks)-1]
	st := newStore(t, iterations*batch)
	r := openRun(t, st, "learn", seed)
	start := time.Now()
	if _, err := r.Loop(ctx, loopConfig(iterations, batch), stages(t, m, embedded.Task(m, o))); err != nil {
		t.Fatal(err)
	}
	elapsed = time.Since(start)
	problems := tiny.HeldOutProblems(evalN)
	var err error
	if base, err = m.ExpectedPass1(ctx, nil, problems); err != nil {
		t.Fatal(err)
	}
	for _, k := range marks {
		a, err := m.LoadAdapter(standintest.Fetch(t, st, r.Branch(), fmt.Sprintf("iterations/%06d/adapter", k)))
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.ExpectedPass1(ctx, a, problems)
		if err != nil {
			t.Fatal(err)
		}
		curve = append(curve, p)
	}
	return base, curve, elapsed
}

package runs

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"golang.org/x/sync/errgroup"
)

// Eval is one evaluated checkpoint on one eval set, from its
// SummaryFile. Metrics maps each metric at its k ("avg@8", "pass@1",
// "pass@8", "pass^8", "maj@8", "exact_pass@1") to its value, Intervals to
// its 95% interval. A metric whose value is not a number (no problem
// could be scored) is left out, and so is an interval that is not one.
type Eval struct {
	Iteration  int                   `json:"iteration"` // 0: the starting policy
	Checkpoint string                `json:"checkpoint"`
	Set        string                `json:"set"`
	Problems   int                   `json:"problems"`
	N          int                   `json:"n"`
	Metrics    map[string]float64    `json:"metrics"`
	Intervals  map[string][2]float64 `json:"intervals"`
	// Path is the summary table the figures were read from.
	Path string `json:"path"`
}

// MetricName is the name a summary row's metric has in Eval.Metrics: a
// metric "at k" ("pass@k", "pass^k") gets its k.
func MetricName(metric string, k int) string {
	if strings.HasSuffix(metric, "@k") || strings.HasSuffix(metric, "^k") {
		return strings.TrimSuffix(metric, "k") + strconv.Itoa(k)
	}
	return metric
}

// ReadEvals reads every evaluation at ref (every EvalsPrefix
// NNNNNN/<set>/SummaryFile), the starting policy first, then by
// checkpoint and set. The summaries are read in parallel; an error is
// the first summary's in that order.
func ReadEvals(ctx context.Context, st artifacts.Store, ref string) ([]Eval, error) {
	return readEvals(ctx, st, ref, EvalsPrefix)
}

// ReadCheckpointEvals is ReadEvals for the listed checkpoints only: what
// a view of one iteration needs, at a cost that does not grow with the
// run.
func ReadCheckpointEvals(ctx context.Context, st artifacts.Store, ref string, checkpoints ...int) ([]Eval, error) {
	prefixes := make([]string, len(checkpoints))
	for i, c := range checkpoints {
		prefixes[i] = fmt.Sprintf("%s%06d/", EvalsPrefix, c)
	}
	return readEvals(ctx, st, ref, prefixes...)
}

func readEvals(ctx context.Context, st artifacts.Store, ref string, prefixes ...string) ([]Eval, error) {
	out := []Eval{}
	for _, prefix := range prefixes {
		for e, err := range st.ListObjects(ctx, ref, &artifacts.ListOptions{Prefix: prefix}) {
			if err != nil {
				return nil, fmt.Errorf("list %s:%s: %w", ref, prefix, err)
			}
			n, set, rest, ok := ParseEvalPath(e.Path)
			if !ok || rest != SummaryFile {
				continue
			}
			out = append(out, Eval{Iteration: n, Set: set, Path: e.Path})
		}
	}
	errs := make([]error, len(out))
	var g errgroup.Group
	g.SetLimit(2 * runtime.GOMAXPROCS(0))
	for i := range out {
		g.Go(func() error {
			ev, err := readEval(ctx, st, ref, out[i].Path)
			ev.Iteration, ev.Set = out[i].Iteration, out[i].Set
			out[i], errs[i] = ev, err
			return nil
		})
	}
	g.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(out, func(a, b Eval) int {
		if c := cmp.Compare(a.Iteration, b.Iteration); c != 0 {
			return c
		}
		return cmp.Compare(a.Set, b.Set)
	})
	return out, nil
}

func readEval(ctx context.Context, st artifacts.Store, ref, path string) (Eval, error) {
	raw, err := readSmall(ctx, st, ref, path)
	if err != nil {
		return Eval{}, err
	}
	if raw == nil {
		return Eval{}, fmt.Errorf("read %s:%s: %w", ref, path, artifacts.ErrNotFound)
	}
	rows, err := tables.Read(bytes.NewReader(raw), int64(len(raw)), ref+":"+path, tables.EvalSummary)
	if err != nil {
		return Eval{}, err
	}
	ev := Eval{Path: path, Metrics: map[string]float64{}, Intervals: map[string][2]float64{}}
	for _, r := range rows {
		ev.Checkpoint, ev.Problems = r.Checkpoint, int(r.NumProblems)
		ev.N = max(ev.N, int(r.N))
		if !finite(r.Value) {
			continue
		}
		name := MetricName(r.Metric, int(r.K))
		ev.Metrics[name] = r.Value
		if finite(r.CILow) && finite(r.CIHigh) {
			ev.Intervals[name] = [2]float64{r.CILow, r.CIHigh}
		}
	}
	return ev, nil
}

package trackers

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/goccy/go-yaml"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Tag prefixes of an iteration's and an evaluation's scalars.
const (
	PrefixTrain  = "train/"  // the train stage's metrics file, flattened
	PrefixReward = "reward/" // each reward component's mean over scored samples, and "total"
	PrefixHealth = "health/" // the numeric columns of the iteration's health row
	PrefixEval   = "eval/"   // eval/<set>/<metric>, and /low and /high of its 95% interval
)

// Iteration reads the points the commit of one iteration holds: the
// iteration's figures (train metrics, reward component means, health) at
// step c.Iteration, and the evaluations committed with it (its checkpoint,
// and at iteration 1 the starting policy) at their checkpoints' steps.
func Iteration(ctx context.Context, st artifacts.Store, c runs.Commit) ([]Point, error) {
	p, err := iterationPoint(ctx, st, c)
	if err != nil {
		return nil, err
	}
	out := []Point{p}
	evals, err := runs.ReadEvals(ctx, st, c.ID)
	if err != nil {
		return nil, err
	}
	evals = slices.DeleteFunc(evals, func(e runs.Eval) bool {
		return e.Iteration != c.Iteration && !(c.Iteration == 1 && e.Iteration == 0)
	})
	return append(out, evalPoints(evals, map[int]runs.Commit{0: c, c.Iteration: c})...), nil
}

// History reads the points of run at ref in step order: every committed
// iteration's (runs.History), and every evaluation at ref after its
// iteration's, each tagged with the commit of its checkpoint's iteration. It is what `rlpipe track`
// back-fills a tracker with.
func History(ctx context.Context, st artifacts.Store, run, ref string) ([]Point, error) {
	var commits []runs.Commit
	for c, err := range runs.History(ctx, st, run, ref) {
		if err != nil {
			return nil, err
		}
		commits = append(commits, c)
	}
	slices.Reverse(commits)
	byIter := map[int]runs.Commit{}
	var out []Point
	for _, c := range commits {
		p, err := iterationPoint(ctx, st, c)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
		byIter[c.Iteration] = c
	}
	if len(commits) > 0 {
		byIter[0] = commits[0]
	}
	evals, err := runs.ReadEvals(ctx, st, ref)
	if err != nil {
		return nil, err
	}
	out = append(out, evalPoints(evals, byIter)...)
	slices.SortStableFunc(out, func(a, b Point) int { return a.Step - b.Step })
	return out, nil
}

// iterationPoint reads one iteration's figures.
func iterationPoint(ctx context.Context, st artifacts.Store, c runs.Commit) (Point, error) {
	n := c.Iteration
	p := Point{Step: n, Time: c.CreationDate, Scalars: map[string]float64{}, Text: map[string]string{TagCommit: c.ID}}
	tm, err := runs.ReadTrainMetrics(ctx, st, c.ID, n)
	if err != nil {
		return p, err
	}
	if tm != nil {
		for k, v := range tm.Values {
			p.Scalars[PrefixTrain+k] = v
		}
	}
	if err := rewardMeans(ctx, st, c.ID, n, p.Scalars); err != nil {
		return p, err
	}
	if err := healthRow(ctx, st, c.ID, n, p.Scalars); err != nil {
		return p, err
	}
	if err := filterGroups(ctx, st, c.ID, n, p.Scalars); err != nil {
		return p, err
	}
	return p, nil
}

// iterationObject reads file of iteration n at ref, and returns it with
// its path; nil, and no error, when the iteration has no such file.
func iterationObject(ctx context.Context, st artifacts.Store, ref string, n int, file string) ([]byte, string, error) {
	path := runs.IterationPath(n, file)
	raw, err := artifacts.ReadObject(ctx, st, ref, path)
	if err != nil {
		return nil, path, fmt.Errorf("read %s:%s: %w", ref, path, err)
	}
	return raw, path, nil
}

// rewardMeans adds the mean of each reward component and of the total
// over the iteration's scored samples.
func rewardMeans(ctx context.Context, st artifacts.Store, ref string, n int, into map[string]float64) error {
	raw, path, err := iterationObject(ctx, st, ref, n, runs.RewardsFile)
	if err != nil || raw == nil {
		return err
	}
	rows, err := tables.Read(bytes.NewReader(raw), int64(len(raw)), ref+":"+path, tables.Rewards)
	if err != nil {
		return err
	}
	if mean, scored := tables.MeanTotal(rows); scored > 0 {
		into[PrefixReward+"total"] = mean
	}
	sums, counts := map[string]float64{}, map[string]int{}
	for _, r := range rows {
		if !r.Scored() {
			continue
		}
		for name, v := range r.Components {
			if finite(v) {
				sums[name] += v
				counts[name]++
			}
		}
	}
	for name, s := range sums {
		into[PrefixReward+name] = s / float64(counts[name])
	}
	return nil
}

// healthRow adds the numeric columns of the iteration's health row (the
// health stage's table, read by column name so that a new column needs no
// change here).
func healthRow(ctx context.Context, st artifacts.Store, ref string, n int, into map[string]float64) error {
	raw, path, err := iterationObject(ctx, st, ref, n, runs.HealthFile)
	if err != nil || raw == nil {
		return err
	}
	f, err := tables.OpenFile(bytes.NewReader(raw), int64(len(raw)), ref+":"+path, nil)
	if err != nil {
		return err
	}
	defer f.Close()
	for rec, err := range f.Records(ctx) {
		if err != nil {
			return err
		}
		if rec.NumRows() == 0 {
			continue
		}
		for i, field := range rec.Schema().Fields() {
			if field.Name == "iteration" {
				continue
			}
			if v, ok := number(rec.Column(i)); ok {
				into[PrefixHealth+field.Name] = v
			}
		}
		break // one row per iteration
	}
	return nil
}

// number is the first value of a numeric column, ok false when it is
// null, not finite or not a number.
func number(col arrow.Array) (float64, bool) {
	if col.Len() == 0 || col.IsNull(0) {
		return 0, false
	}
	var v float64
	switch c := col.(type) {
	case *array.Float64:
		v = c.Value(0)
	case *array.Float32:
		v = float64(c.Value(0))
	case *array.Int64:
		v = float64(c.Value(0))
	case *array.Int32:
		v = float64(c.Value(0))
	default:
		return 0, false
	}
	return v, finite(v)
}

// evalPoints are one point per checkpoint: every metric of every set,
// with its interval's bounds as scalars of their own.
func evalPoints(evals []runs.Eval, commits map[int]runs.Commit) []Point {
	var out []Point
	for _, e := range evals {
		if len(out) == 0 || out[len(out)-1].Step != e.Iteration {
			p := Point{Step: e.Iteration, Scalars: map[string]float64{}, Text: map[string]string{}, Checkpoint: e.Checkpoint}
			if c, ok := commits[e.Iteration]; ok {
				p.Time, p.Text[TagCommit] = c.CreationDate, c.ID
			}
			out = append(out, p)
		}
		p := out[len(out)-1]
		for m, v := range e.Metrics {
			tag := PrefixEval + e.Set + "/" + m
			p.Scalars[tag] = v
			if ci, ok := e.Intervals[m]; ok {
				p.Scalars[tag+"/low"], p.Scalars[tag+"/high"] = ci[0], ci[1]
			}
		}
	}
	return out
}

// Params flattens a config's YAML to dotted keys and string values
// ("stages.train.kind": "grpo", "eval.k[0]": "1"): a tracker's
// parameters.
func Params(config []byte) (map[string]string, error) {
	var tree any
	if err := yaml.Unmarshal(config, &tree); err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t {
				walk(join(prefix, k), x)
			}
		case []any:
			for i, x := range t {
				walk(prefix+"["+strconv.Itoa(i)+"]", x)
			}
		case nil:
		default:
			out[prefix] = strings.TrimSpace(fmt.Sprint(t))
		}
	}
	walk("", tree)
	return out, nil
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

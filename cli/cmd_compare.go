package cli

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
)

func newCompareCommand(g *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "compare RUN RUN [RUN...]",
		Short: "compare runs: held-out figures with intervals, iterations, wall time and the config keys that differ",
		Long: `Compare two or more runs of the store (their branches runs-RUN, or any
ref: a rescore branch, a commit, a tag) in the terminal:

  - each run's commit, iterations done (of those its config asks for) and
    wall time, from the first event of iteration 1 to the last event of
    the last iteration (a resumed run counts its pause);
  - for every eval set and headline metric (exact_pass@1, pass@k), the
    final checkpoint's figure and the best one's, each with its 95%
    interval, as ` + "`rlpipe evals`" + ` prints them;
  - the keys of the effective configs (defaults filled in) whose values
    differ between the runs; "-" marks a key a run does not have.

-o json prints all of it, with every key of each effective config.`,
		Example: `  rlpipe compare arith arith-lr2e-3
  rlpipe compare arith arith-lr2e-3 arith-beta -o json`,
		Args: rangeArgs(2, "RUN", "RUN"),
		RunE: g.onStore(func(ctx context.Context, st artifacts.Store, args []string, p printer) error {
			return compareFunc(ctx, st, args, p)
		}),
	}
}

// compareOut is `compare -o json`.
type compareOut struct {
	Runs []compareRun `json:"runs"`
	// ConfigDiff are the effective config keys whose values differ
	// between the runs, sorted; each value is in the order of runs, null
	// for a run whose config lacks the key.
	ConfigDiff []configDiff `json:"config_diff"`
}

// compareRun is one run of compareOut.
type compareRun struct {
	Run    string `json:"run"`
	Ref    string `json:"ref"`
	Commit string `json:"commit"`
	// Iterations is the last committed iteration; Planned the config's
	// iterations.
	Iterations  int     `json:"iterations"`
	Planned     int     `json:"planned"`
	WallSeconds float64 `json:"wall_seconds"`
	// Figures are the headline held-out metrics, by set then metric.
	Figures []compareFigure `json:"figures"`
	// Config is the effective config (defaults filled in), flattened to
	// dotted keys ("trainer.lora.rank").
	Config map[string]string `json:"config"`
}

// compareFigure is one metric on one eval set: its value at the last
// evaluated checkpoint and at the best one.
type compareFigure struct {
	Set    string      `json:"set"`
	Metric string      `json:"metric"`
	Final  checkpointV `json:"final"`
	Best   checkpointV `json:"best"`
}

// checkpointV is a metric at one checkpoint with its 95% interval (nil
// when the evaluation has none).
type checkpointV struct {
	Checkpoint string      `json:"checkpoint"`
	Iteration  int         `json:"iteration"`
	Value      float64     `json:"value"`
	Interval   *[2]float64 `json:"interval"`
}

// configDiff is one key of compareOut.ConfigDiff.
type configDiff struct {
	Key    string    `json:"key"`
	Values []*string `json:"values"`
}

func compareFunc(ctx context.Context, st artifacts.Store, names []string, p printer) error {
	out := compareOut{Runs: []compareRun{}, ConfigDiff: []configDiff{}}
	for _, name := range names {
		r, err := readCompareRun(ctx, st, name)
		if err != nil {
			return err
		}
		out.Runs = append(out.Runs, r)
	}
	out.ConfigDiff = diffConfigs(out.Runs)
	if p.json {
		return p.JSON(out)
	}
	return p.Printf("%s", compareText(out))
}

// readCompareRun reads what compare shows of one run.
func readCompareRun(ctx context.Context, st artifacts.Store, name string) (compareRun, error) {
	ref, err := runRef(ctx, st, name)
	if err != nil {
		return compareRun{}, fmt.Errorf("compare: %w", err)
	}
	c, err := st.ResolveRef(ctx, ref)
	if err != nil {
		return compareRun{}, withOp(err, "compare %s", name)
	}
	commit := c.ID
	r := compareRun{Run: name, Ref: ref, Commit: commit, Figures: []compareFigure{}}
	raw, err := artifacts.ReadObject(ctx, st, commit, runs.ConfigPath)
	if err != nil {
		return r, fmt.Errorf("compare %s: read %s:%s: %w", name, ref, runs.ConfigPath, err)
	}
	if raw == nil {
		return r, fmt.Errorf("compare %s: %s has no %s: it is not a run (`rlpipe status` lists the runs): %w", name, ref, runs.ConfigPath, artifacts.ErrNotFound)
	}
	cfg, err := config.Parse(ref+":"+runs.ConfigPath, raw, kinds.Registry())
	if err != nil {
		return r, fmt.Errorf("compare %s: the recorded config does not parse with this rlpipe (`rlpipe cat %s:%s` shows it; the rlpipe that made the run compares it): %w",
			name, ref, runs.ConfigPath, err)
	}
	r.Planned = cfg.Iterations
	if r.Config, err = cfg.EffectiveKeys(); err != nil {
		return r, fmt.Errorf("compare %s: %w", name, err)
	}
	if s, err := runs.ReadState(ctx, st, commit); err != nil {
		return r, withOp(err, "compare %s", name)
	} else if s != nil {
		r.Iterations = s.Iteration
	}
	if r.WallSeconds, err = wallSeconds(ctx, st, name, commit); err != nil {
		return r, withOp(err, "compare %s", name)
	}
	evals, err := readEvals(ctx, st, commit)
	if err != nil {
		return r, withOp(err, "compare %s: evaluations", name)
	}
	r.Figures = headlineFigures(evals)
	return r, nil
}

// wallSeconds is the time from the first event of a run's iteration 1 to
// the last event (or the commit) of its last iteration at head; 0 before
// any iteration. Commit dates may be whole seconds; event times are not.
func wallSeconds(ctx context.Context, st artifacts.Store, run, head string) (float64, error) {
	var last, first runs.Commit
	for c, err := range runs.History(ctx, st, run, head) {
		if err != nil {
			return 0, err
		}
		if last.ID == "" {
			last = c
		}
		first = c
	}
	if last.ID == "" {
		return 0, nil
	}
	start, end := first.CreationDate, last.CreationDate
	for _, c := range []runs.Commit{first, last} {
		raw, err := artifacts.ReadObject(ctx, st, c.ID, runs.EventsPath(c.Iteration))
		if err != nil {
			return 0, err
		}
		_, t0, t1 := pipeline.ParseEventLog(raw)
		if c.ID == first.ID && !t0.IsZero() && t0.Before(start) {
			start = t0
		}
		if c.ID == last.ID && t1.After(end) {
			end = t1
		}
	}
	return end.Sub(start).Round(time.Millisecond).Seconds(), nil
}

// headlineFigures picks, for every eval set, the metrics a table of evals
// shows (evalColumns) at the last evaluated checkpoint and at the best;
// a tie for best goes to the earlier checkpoint.
func headlineFigures(evals []evalOut) []compareFigure {
	out := []compareFigure{}
	var sets []string
	bySet := map[string][]evalOut{}
	for _, e := range evals {
		if _, ok := bySet[e.Set]; !ok {
			sets = append(sets, e.Set)
		}
		bySet[e.Set] = append(bySet[e.Set], e)
	}
	at := func(e evalOut, m string) checkpointV {
		v := checkpointV{Checkpoint: e.Checkpoint, Iteration: e.Iteration, Value: e.Metrics[m]}
		if iv, ok := e.Intervals[m]; ok {
			v.Interval = &iv
		}
		return v
	}
	for _, set := range sets {
		es := bySet[set]
		for _, m := range evalColumns(es) {
			f := compareFigure{Set: set, Metric: m}
			found := false
			for _, e := range es {
				v, ok := e.Metrics[m]
				if !ok {
					continue
				}
				f.Final = at(e, m)
				if !found || v > f.Best.Value {
					f.Best = at(e, m)
				}
				found = true
			}
			if found {
				out = append(out, f)
			}
		}
	}
	return out
}

// diffConfigs lists the keys whose values differ between the runs, the
// run's name (key "run") left out: the table names the runs.
func diffConfigs(rs []compareRun) []configDiff {
	keys := map[string]bool{}
	for _, r := range rs {
		for k := range r.Config {
			keys[k] = true
		}
	}
	out := []configDiff{}
	for k := range keys {
		if k == "run" {
			continue
		}
		d := configDiff{Key: k}
		same := true
		for _, r := range rs {
			var v *string
			if s, ok := r.Config[k]; ok {
				v = &s
			}
			d.Values = append(d.Values, v)
			if first := d.Values[0]; (v == nil) != (first == nil) || v != nil && *v != *first {
				same = false
			}
		}
		if !same {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// compareText is compareOut for people: three tables.
func compareText(out compareOut) string {
	var sb strings.Builder
	t := newTable("RUN", "REF", "COMMIT", "ITERATIONS", "WALL").alignRight(3, 4)
	for _, r := range out.Runs {
		t.add(r.Run, r.Ref, shortID(r.Commit), fmt.Sprintf("%d/%d", r.Iterations, r.Planned),
			time.Duration(r.WallSeconds*float64(time.Second)).Round(100*time.Millisecond).String())
	}
	_ = t.write(&sb)

	sb.WriteByte('\n')
	f := newTable("RUN", "SET", "METRIC", "FINAL", "95% INTERVAL", "AT", "BEST", "95% INTERVAL", "AT").alignRight(3, 6)
	for _, r := range out.Runs {
		for _, x := range r.Figures {
			f.add(r.Run, x.Set, x.Metric, strconv.FormatFloat(x.Final.Value, 'f', 4, 64), intervalText(x.Final.Interval), x.Final.Checkpoint,
				strconv.FormatFloat(x.Best.Value, 'f', 4, 64), intervalText(x.Best.Interval), x.Best.Checkpoint)
		}
		if len(r.Figures) == 0 {
			f.add(r.Run, "-", "no evaluations", "", "", "", "", "", "")
		}
	}
	_ = f.write(&sb)

	sb.WriteByte('\n')
	if len(out.ConfigDiff) == 0 {
		sb.WriteString("effective configs: the same\n")
		return sb.String()
	}
	header := []string{"CONFIG KEY"}
	for _, r := range out.Runs {
		header = append(header, r.Run)
	}
	c := newTable(header...)
	for _, d := range out.ConfigDiff {
		row := []string{d.Key}
		for _, v := range d.Values {
			if v == nil {
				row = append(row, "-")
			} else {
				row = append(row, *v)
			}
		}
		c.add(row...)
	}
	_ = c.write(&sb)
	return sb.String()
}

// intervalText is a 95% interval as `evals` prints it, "-" for none.
func intervalText(iv *[2]float64) string {
	if iv == nil {
		return "-"
	}
	return fmt.Sprintf("[%.4f, %.4f]", iv[0], iv[1])
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline"
)

func newStatusCommand(g *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "status [RUN]",
		Short: "list runs, or show one run's iterations and state",
		Long: `Without RUN, list the runs in the store (branches runs-NAME) with their last
committed iteration and whether a process holds them. With RUN, show its
iterations (commit, tasks run, cached and attempted, time in tasks) and
its loop state.`,
		Example: `  rlpipe status
  rlpipe status standin
  rlpipe status standin -o json`,
		Args: rangeArgs(0, "RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
				if len(args) == 0 {
					return statusListFunc(ctx, st, g.printer(cmd))
				}
				return statusRunFunc(ctx, st, args[0], g.printer(cmd))
			})
		},
	}
}

// lockOut describes the process holding a run.
type lockOut = pipeline.LockHolder

// runListOut is one row of `status` without RUN.
type runListOut = pipeline.RunStatus

type statusListOut struct {
	Runs []runListOut `json:"runs"`
}

// readLock reads the lock of a run, nil when nobody holds it.
func readLock(ctx context.Context, st artifacts.Store, run string) (*lockOut, error) {
	return pipeline.ReadLock(ctx, st, run)
}

// lockString is a lock for people: "-" when nobody holds it.
func lockString(l *lockOut) string {
	if l == nil {
		return "-"
	}
	s := fmt.Sprintf("pid %d on %s", l.PID, l.Host)
	if !l.Alive {
		s += " (stale: the next run takes it over)"
	} else if !l.Heartbeat.IsZero() {
		s += fmt.Sprintf(" (heartbeat %s ago)", time.Since(l.Heartbeat).Round(time.Second))
	}
	return s
}

func statusListFunc(ctx context.Context, st artifacts.Store, p printer) error {
	list, err := pipeline.ListRuns(ctx, st)
	if err != nil {
		return withOp(err, "status")
	}
	out := statusListOut{Runs: list}
	if p.json {
		return p.JSON(out)
	}
	if len(out.Runs) == 0 {
		return p.Printf("no runs yet: `rlpipe run -f pipeline.yaml` starts one\n")
	}
	t := newTable("RUN", "ITERATION", "COMMIT", "DATE", "LOCK").alignRight(1)
	for _, r := range out.Runs {
		it := "-"
		if r.Iteration > 0 {
			it = strconv.Itoa(r.Iteration)
		}
		t.add(r.Run, it, shortID(r.Commit), formatTime(r.Date), lockString(r.Lock))
	}
	return t.write(p.w)
}

// iterationOut is one iteration of a run.
type iterationOut struct {
	Iteration int       `json:"iteration"`
	Commit    string    `json:"commit"`
	Date      time.Time `json:"date"`
	Tasks     int       `json:"tasks"`    // task calls
	Ran       int       `json:"ran"`      // of which ran
	Cached    int       `json:"cached"`   // of which were cache hits
	Attempts  int       `json:"attempts"` // attempts over all calls
	Seconds   float64   `json:"seconds"`  // time spent in the calls, summed
}

// runStatusOut is the JSON shape of `status RUN`.
type runStatusOut struct {
	Run        string         `json:"run"`
	Branch     string         `json:"branch"`
	Commit     string         `json:"commit"`
	ConfigHash string         `json:"config_hash,omitempty"`
	State      *runs.State    `json:"state"` // nil before the first commit
	Lock       *lockOut       `json:"lock"`
	Iterations []iterationOut `json:"iterations"`
	// Evals are the evaluated checkpoints, the starting policy first.
	Evals []evalOut `json:"evals"`
}

func statusRunFunc(ctx context.Context, st artifacts.Store, run string, p printer) error {
	branch := runs.Branch(run)
	if err := artifacts.ValidateBranchName(branch); err != nil {
		return usagef("status: %q is not a run name", run)
	}
	b, err := st.GetBranch(ctx, branch)
	if errors.Is(err, artifacts.ErrNotFound) {
		return explain(err, "status: no run %q in this store: `rlpipe status` lists the runs", run)
	}
	if err != nil {
		return withOp(err, "status %s", run)
	}
	out := runStatusOut{Run: run, Branch: branch, Commit: b.CommitID, Iterations: []iterationOut{}}
	if out.Lock, err = readLock(ctx, st, run); err != nil {
		return err
	}
	if out.State, err = runs.ReadState(ctx, st, b.CommitID); err != nil {
		return withOp(err, "status %s", run)
	}
	for c, err := range runs.History(ctx, st, run, b.CommitID) {
		if err != nil {
			return withOp(err, "status %s", run)
		}
		n := c.Iteration
		if out.ConfigHash == "" {
			out.ConfigHash = c.Metadata[runs.MetaConfigHash]
		}
		row := iterationOut{Iteration: n, Commit: c.ID, Date: c.CreationDate.UTC()}
		m, err := runs.ReadMetrics(ctx, st, c.ID, n)
		if err != nil {
			return withOp(err, "status %s: the metrics of iteration %d", run, n)
		}
		if m != nil {
			for _, t := range m.Tasks {
				row.Tasks++
				row.Attempts += t.Attempts
				row.Seconds += t.Seconds
				if t.Cached {
					row.Cached++
				} else {
					row.Ran++
				}
			}
			row.Seconds = float64(time.Duration(row.Seconds * float64(time.Second)).Round(time.Millisecond).Seconds())
		}
		out.Iterations = append(out.Iterations, row)
	}
	sort.Slice(out.Iterations, func(i, j int) bool { return out.Iterations[i].Iteration < out.Iterations[j].Iteration })
	if out.Evals, err = readEvals(ctx, st, b.CommitID); err != nil {
		return withOp(err, "status %s: evaluations", run)
	}
	if p.json {
		return p.JSON(out)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "run %s (branch %s) at %s\n", run, branch, shortID(out.Commit))
	if out.Lock != nil {
		fmt.Fprintf(&sb, "locked by %s\n", lockString(out.Lock))
	}
	if s := out.State; s != nil {
		keys := make([]string, 0, len(s.Adapters))
		for k := range s.Adapters {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { a, _ := strconv.Atoi(keys[i]); b, _ := strconv.Atoi(keys[j]); return a < b })
		var ad []string
		for _, k := range keys {
			ad = append(ad, k+"="+s.Adapters[k])
		}
		fmt.Fprintf(&sb, "state: iteration %d, cursor %d, adapters %s\n", s.Iteration, s.Cursor, strings.Join(ad, " "))
	} else {
		sb.WriteString("state: no iteration committed yet\n")
	}
	if out.ConfigHash != "" {
		fmt.Fprintf(&sb, "config: %s\n", out.ConfigHash)
	}
	if len(out.Iterations) > 0 {
		sb.WriteByte('\n')
		t := newTable("ITERATION", "COMMIT", "DATE", "TASKS", "RAN", "CACHED", "ATTEMPTS", "TASK TIME").alignRight(0, 3, 4, 5, 6, 7)
		for _, r := range out.Iterations {
			t.add(strconv.Itoa(r.Iteration), shortID(r.Commit), formatTime(r.Date), strconv.Itoa(r.Tasks), strconv.Itoa(r.Ran),
				strconv.Itoa(r.Cached), strconv.Itoa(r.Attempts), (time.Duration(r.Seconds * float64(time.Second))).Round(10*time.Millisecond).String())
		}
		_ = t.write(&sb)
	}
	if len(out.Evals) > 0 {
		cols := evalColumns(out.Evals)
		sb.WriteByte('\n')
		t := newTable(append([]string{"CHECKPOINT", "SET", "PROBLEMS", "N"}, cols...)...)
		for i := 2; i < 4+len(cols); i++ {
			t.alignRight(i)
		}
		for _, e := range out.Evals {
			row := []string{e.Checkpoint, e.Set, strconv.Itoa(e.Problems), strconv.Itoa(e.N)}
			for _, c := range cols {
				if v, ok := e.Metrics[c]; ok {
					row = append(row, strconv.FormatFloat(v, 'f', 4, 64))
				} else {
					row = append(row, "")
				}
			}
			t.add(row...)
		}
		_ = t.write(&sb)
		if line := learningLine(out.Evals); line != "" {
			sb.WriteString(line + "\n")
		}
	}
	return p.Printf("%s", sb.String())
}

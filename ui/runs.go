package ui

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
)

// Commit metadata the engine records on every iteration commit.
const (
	metaRun        = "rlpipe.run"
	metaIteration  = "rlpipe.iteration"
	metaConfigHash = "rlpipe.config-hash"
)

// runPrefix starts the name of every run branch (pipeline.RunBranch).
const runPrefix = "runs-"

// maxJSONObject bounds the small JSON objects read whole (metrics, state,
// events): a larger one is not what the engine writes.
const maxJSONObject = 8 << 20

// Lock describes the process holding a run.
type Lock = pipeline.LockHolder

// RunSummary is one row of /api/runs.
type RunSummary struct {
	Run       string    `json:"run"`
	Branch    string    `json:"branch"`
	Iteration int       `json:"iteration"` // last committed; 0 for none
	Commit    string    `json:"commit"`
	Date      time.Time `json:"date"`
	Lock      *Lock     `json:"lock"`
}

// Task is one task call of an iteration.
type Task struct {
	Name     string  `json:"name"`
	Seconds  float64 `json:"seconds"`
	Attempts int     `json:"attempts"`
	Cached   bool    `json:"cached"`
	Key      string  `json:"key,omitempty"`
	// Start and End are seconds from the iteration's first event, from
	// events/NNNNNN.jsonl (only in the iteration view).
	Start *float64 `json:"start,omitempty"`
	End   *float64 `json:"end,omitempty"`
	Stage string   `json:"stage,omitempty"`
	Env   string   `json:"env,omitempty"`
	Error string   `json:"error,omitempty"`
}

// IterationSummary is one iteration in /api/runs/{run}.
type IterationSummary struct {
	Iteration int       `json:"iteration"`
	Commit    string    `json:"commit"`
	Date      time.Time `json:"date"`
	Tasks     []Task    `json:"tasks"`
	Seconds   float64   `json:"seconds"` // time in tasks, summed
	// Train holds the numbers of iterations/NNNNNN/train_metrics.json,
	// nested objects flattened with dots ("reward.mean", "loss").
	Train map[string]float64 `json:"train,omitempty"`
	// NotComputed names the train metrics the trainer wrote as null, such
	// as kl at β = 0: shown as not computed, never as 0.
	NotComputed []string `json:"not_computed,omitempty"`
}

// Eval is one evaluated checkpoint on one eval set (as `status -o json`).
type Eval struct {
	Checkpoint string                `json:"checkpoint"`
	Iteration  int                   `json:"iteration"` // 0: the starting policy
	Set        string                `json:"set"`
	Problems   int                   `json:"problems"`
	N          int                   `json:"n"`
	Metrics    map[string]float64    `json:"metrics"`
	Intervals  map[string][2]float64 `json:"intervals"`
	Path       string                `json:"path"`
}

// RunDetail is /api/runs/{run}.
type RunDetail struct {
	Run        string              `json:"run"`
	Branch     string              `json:"branch"`
	Commit     string              `json:"commit"`
	ConfigHash string              `json:"config_hash,omitempty"`
	State      *pipeline.LoopState `json:"state"` // nil before the first commit
	Lock       *Lock               `json:"lock"`
	Iterations []IterationSummary  `json:"iterations"`
	Evals      []Eval              `json:"evals"`
}

// Artifact is an object an iteration's commit added or changed.
type Artifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size_bytes"`
	Change string `json:"change"`
	Table  bool   `json:"table"` // a Parquet file: open it with /api/table
}

// IterationDetail is /api/runs/{run}/iterations/{n}.
type IterationDetail struct {
	Run       string             `json:"run"`
	Iteration int                `json:"iteration"`
	Commit    string             `json:"commit"`
	Parent    string             `json:"parent,omitempty"`
	Date      time.Time          `json:"date"`
	Message   string             `json:"message"`
	Metadata  map[string]string  `json:"metadata,omitempty"`
	Tasks     []Task             `json:"tasks"`
	Seconds   float64            `json:"seconds"`
	Train     map[string]float64 `json:"train,omitempty"`
	// NotComputed is as in IterationSummary.
	NotComputed []string   `json:"not_computed,omitempty"`
	Artifacts   []Artifact `json:"artifacts"`
	// Wall is the time from the iteration's first event to its last, in
	// seconds (0 without events).
	Wall float64 `json:"wall_seconds"`
}

// commitCache keeps what was read from immutable commits (an iteration's
// metrics), so that a page polled every second reads each commit once.
type commitCache struct {
	mu  sync.Mutex
	max int
	m   map[string]IterationSummary
}

func newCommitCache(max int) *commitCache {
	return &commitCache{max: max, m: map[string]IterationSummary{}}
}

func (c *commitCache) get(id string) (IterationSummary, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[id]
	return v, ok
}

func (c *commitCache) put(id string, v IterationSummary) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m) // crude but bounded; a refill costs one read per commit
	}
	c.m[id] = v
}

// readSmall reads an object of at most maxJSONObject bytes; a missing
// object gives nil, nil.
func readSmall(ctx context.Context, st artifacts.Store, ref, path string) ([]byte, error) {
	rc, _, err := st.GetObject(ctx, ref, path)
	if errors.Is(err, artifacts.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, readErr(err, ref, path)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxJSONObject+1))
	if err != nil {
		return nil, fmt.Errorf("read %s:%s: %w", ref, path, err)
	}
	if len(b) > maxJSONObject {
		return nil, fmt.Errorf("read %s:%s: larger than %d bytes", ref, path, maxJSONObject)
	}
	return b, nil
}

// readLock reads the lock object of a run, nil when nobody holds it.
func readLock(ctx context.Context, st artifacts.Store, run string) (*Lock, error) {
	return pipeline.ReadLock(ctx, st, run)
}

// listRuns lists the run branches with their last iteration and lock.
func listRuns(ctx context.Context, st artifacts.Store) ([]RunSummary, error) {
	out := []RunSummary{}
	for b, err := range st.ListBranches(ctx) {
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		run, ok := strings.CutPrefix(b.Name, runPrefix)
		if !ok {
			continue
		}
		c, err := st.GetCommit(ctx, b.CommitID)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", run, err)
		}
		row := RunSummary{Run: run, Branch: b.Name, Commit: c.ID, Date: c.CreationDate.UTC()}
		if c.Metadata[metaRun] == run {
			row.Iteration, _ = strconv.Atoi(c.Metadata[metaIteration])
		}
		if row.Lock, err = readLock(ctx, st, run); err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, nil
}

// runBranch checks a run name and returns its branch.
func runBranch(run string) (string, error) {
	branch := pipeline.RunBranch(run)
	if err := artifacts.ValidateBranchName(branch); err != nil {
		return "", kindf(artifacts.ErrInvalid, "%q is not a run name: a run is named by letters, digits, '_' and '-'", run)
	}
	return branch, nil
}

// runCommits walks a run's iteration commits, newest first, calling fn
// with each commit and its iteration number; fn returns false to stop.
// The walk ends where the run branched off.
func runCommits(ctx context.Context, st artifacts.Store, run, head string, fn func(c artifacts.Commit, n int) bool) error {
	seen := false
	for c, err := range st.Log(ctx, head, &artifacts.LogOptions{FirstParent: true}) {
		if err != nil {
			return fmt.Errorf("history of run %s: %w", run, err)
		}
		if c.Metadata[metaRun] != run {
			if seen || c.Metadata[metaRun] == "" {
				return nil
			}
			continue // another run's commit on top (a rescoring); keep looking
		}
		n, err := strconv.Atoi(c.Metadata[metaIteration])
		if err != nil {
			continue
		}
		seen = true
		if !fn(c, n) || n == 1 {
			return nil
		}
	}
	return nil
}

// runDetail reads a run: state, lock, iterations and evaluations.
func (s *Server) runDetail(ctx context.Context, run string) (*RunDetail, error) {
	branch, err := runBranch(run)
	if err != nil {
		return nil, err
	}
	b, err := s.st.GetBranch(ctx, branch)
	if errors.Is(err, artifacts.ErrNotFound) {
		return nil, noRun(run, branch)
	}
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", run, err)
	}
	out := &RunDetail{Run: run, Branch: branch, Commit: b.CommitID, Iterations: []IterationSummary{}}
	if out.Lock, err = readLock(ctx, s.st, run); err != nil {
		return nil, err
	}
	if raw, err := readSmall(ctx, s.st, b.CommitID, pipeline.StatePath); err != nil {
		return nil, err
	} else if raw != nil {
		var st pipeline.LoopState
		if err := json.Unmarshal(raw, &st); err != nil {
			return nil, fmt.Errorf("run %s: %s: %w", run, pipeline.StatePath, err)
		}
		out.State = &st
	}
	var walkErr error
	err = runCommits(ctx, s.st, run, b.CommitID, func(c artifacts.Commit, n int) bool {
		if out.ConfigHash == "" {
			out.ConfigHash = c.Metadata[metaConfigHash]
		}
		it, err := s.iterationSummary(ctx, c, n)
		if err != nil {
			walkErr = err
			return false
		}
		out.Iterations = append(out.Iterations, it)
		return true
	})
	if err = errors.Join(err, walkErr); err != nil {
		return nil, err
	}
	sort.Slice(out.Iterations, func(i, j int) bool { return out.Iterations[i].Iteration < out.Iterations[j].Iteration })
	if out.Evals, err = readEvals(ctx, s.st, b.CommitID); err != nil {
		return nil, fmt.Errorf("run %s: evaluations: %w", run, err)
	}
	return out, nil
}

// iterationSummary reads an iteration's task metrics and train metrics,
// once per commit.
func (s *Server) iterationSummary(ctx context.Context, c artifacts.Commit, n int) (IterationSummary, error) {
	if v, ok := s.cache.get(c.ID); ok {
		return v, nil
	}
	it := IterationSummary{Iteration: n, Commit: c.ID, Date: c.CreationDate.UTC(), Tasks: []Task{}}
	raw, err := readSmall(ctx, s.st, c.ID, metricsPath(n))
	if err != nil {
		return it, err
	}
	if raw != nil {
		var m pipeline.IterationMetrics
		if err := json.Unmarshal(raw, &m); err == nil {
			it.Tasks = tasksOf(m)
			for _, t := range it.Tasks {
				it.Seconds += t.Seconds
			}
		}
	}
	raw, err = readSmall(ctx, s.st, c.ID, trainMetricsPath(n))
	if err != nil {
		return it, err
	}
	it.Train, it.NotComputed = flattenNumbers(raw)
	s.cache.put(c.ID, it)
	return it, nil
}

func metricsPath(n int) string      { return fmt.Sprintf("events/%06d.metrics.json", n) }
func eventsPath(n int) string       { return fmt.Sprintf("events/%06d.jsonl", n) }
func trainMetricsPath(n int) string { return fmt.Sprintf("iterations/%06d/train_metrics.json", n) }

// tasksOf lists an iteration's tasks in the order of the loop's stages,
// then by name.
func tasksOf(m pipeline.IterationMetrics) []Task {
	out := make([]Task, 0, len(m.Tasks))
	for name, t := range m.Tasks {
		out = append(out, Task{Name: name, Seconds: t.Seconds, Attempts: t.Attempts, Cached: t.Cached, Key: t.Key})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := stageRank(out[i].Name), stageRank(out[j].Name)
		if a != b {
			return a < b
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// stageRank orders the loop's stages as they run; an evaluation's calls
// ("eval-generate-start", "eval") come last.
func stageRank(name string) int {
	switch {
	case strings.HasPrefix(name, "eval-generate"):
		return 4
	case strings.HasPrefix(name, "eval"):
		return 5
	}
	for i, stage := range pipeline.SlotNames() {
		if name == stage || strings.HasPrefix(name, stage+"-") {
			return i
		}
	}
	return 6
}

// flattenNumbers turns a JSON object into name → number: nested objects
// join their keys with dots ("reward.mean"), numeric strings count (the
// stand-in trainer writes them), arrays and other values are left out;
// nulls are the sorted names of the null values (metrics not computed).
// Anything that is not a JSON object gives nil.
func flattenNumbers(raw []byte) (out map[string]float64, nulls []string) {
	if raw == nil {
		return nil, nil
	}
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, nil
	}
	out = map[string]float64{}
	var walk func(prefix string, m map[string]any, depth int)
	walk = func(prefix string, m map[string]any, depth int) {
		for k, x := range m {
			name := prefix + k
			switch x := x.(type) {
			case json.Number:
				if f, err := x.Float64(); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
					out[name] = f
				}
			case string:
				if f, err := strconv.ParseFloat(x, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
					out[name] = f
				}
			case nil:
				nulls = append(nulls, name)
			case map[string]any:
				if depth < 3 {
					walk(name+".", x, depth+1)
				}
			}
		}
	}
	walk("", v, 0)
	sort.Strings(nulls)
	return out, nulls
}

// findIteration returns the commit of iteration n of a run.
func (s *Server) findIteration(ctx context.Context, run string, n int) (artifacts.Commit, error) {
	branch, err := runBranch(run)
	if err != nil {
		return artifacts.Commit{}, err
	}
	b, err := s.st.GetBranch(ctx, branch)
	if errors.Is(err, artifacts.ErrNotFound) {
		return artifacts.Commit{}, noRun(run, branch)
	}
	if err != nil {
		return artifacts.Commit{}, fmt.Errorf("run %s: %w", run, err)
	}
	var found *artifacts.Commit
	last := 0
	err = runCommits(ctx, s.st, run, b.CommitID, func(c artifacts.Commit, i int) bool {
		if last == 0 {
			last = i
		}
		if i == n {
			found = &c
			return false
		}
		return i > n
	})
	if err != nil {
		return artifacts.Commit{}, err
	}
	if found == nil {
		return artifacts.Commit{}, kindf(artifacts.ErrNotFound, "run %s has no iteration %d (its last is %d)", run, n, last)
	}
	return *found, nil
}

// iterationDetail reads one iteration: its tasks with timings from the
// event log, its train metrics, and what its commit wrote.
func (s *Server) iterationDetail(ctx context.Context, run string, n int) (*IterationDetail, error) {
	c, err := s.findIteration(ctx, run, n)
	if err != nil {
		return nil, err
	}
	sum, err := s.iterationSummary(ctx, c, n)
	if err != nil {
		return nil, err
	}
	out := &IterationDetail{Run: run, Iteration: n, Commit: c.ID, Date: c.CreationDate.UTC(), Message: c.Message,
		Metadata: c.Metadata, Tasks: append([]Task(nil), sum.Tasks...), Seconds: sum.Seconds, Train: sum.Train, NotComputed: sum.NotComputed, Artifacts: []Artifact{}}
	raw, err := readSmall(ctx, s.st, c.ID, eventsPath(n))
	if err != nil {
		return nil, err
	}
	out.Wall = placeTasks(out.Tasks, raw)
	if len(c.Parents) > 0 {
		out.Parent = c.Parents[0]
		for ch, err := range s.st.Diff(ctx, out.Parent, c.ID, &artifacts.DiffOptions{TwoDot: true}) {
			if err != nil {
				return nil, fmt.Errorf("iteration %d of run %s: what it wrote: %w", n, run, err)
			}
			if ch.Type == artifacts.ChangeRemoved {
				continue
			}
			out.Artifacts = append(out.Artifacts, Artifact{Path: ch.Path, Size: ch.Size, Change: string(ch.Type), Table: strings.HasSuffix(ch.Path, ".parquet")})
		}
	} else {
		for e, err := range s.st.ListObjects(ctx, c.ID, nil) {
			if err != nil {
				return nil, fmt.Errorf("iteration %d of run %s: list: %w", n, run, err)
			}
			out.Artifacts = append(out.Artifacts, Artifact{Path: e.Path, Size: e.Size, Change: string(artifacts.ChangeAdded), Table: strings.HasSuffix(e.Path, ".parquet")})
		}
	}
	return out, nil
}

// placeTasks sets each task's start and end (seconds from the first event)
// from an iteration's event log, and returns the span of the log. The last
// attempt of a task decides its end; an error of a failed attempt is kept.
func placeTasks(tasks []Task, raw []byte) float64 {
	if len(raw) == 0 {
		return 0
	}
	var evs []pipeline.Event
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), maxJSONObject)
	for sc.Scan() {
		var e pipeline.Event
		if json.Unmarshal(sc.Bytes(), &e) == nil && !e.Time.IsZero() {
			evs = append(evs, e)
		}
	}
	if len(evs) == 0 {
		return 0
	}
	t0, t1 := evs[0].Time, evs[0].Time
	for _, e := range evs {
		if e.Time.Before(t0) {
			t0 = e.Time
		}
		if e.Time.After(t1) {
			t1 = e.Time
		}
	}
	at := func(t time.Time) *float64 { v := t.Sub(t0).Seconds(); return &v }
	idx := map[string]int{}
	for i, t := range tasks {
		idx[t.Name] = i
	}
	for _, e := range evs {
		i, ok := idx[e.Task]
		if !ok {
			continue
		}
		t := &tasks[i]
		if e.Stage != "" {
			t.Stage = e.Stage
		}
		if e.Env != "" {
			t.Env = e.Env
		}
		switch e.Kind {
		case pipeline.EventStarted:
			if t.Start == nil {
				t.Start = at(e.Time)
			}
		case pipeline.EventFinished, pipeline.EventCached, pipeline.EventFailed:
			t.End = at(e.Time)
			if t.Start == nil {
				t.Start = at(e.Time.Add(-e.Duration))
			}
			if e.Kind == pipeline.EventFailed {
				t.Error = e.Error
			}
		case pipeline.EventRetried:
			t.Error = e.Error
		}
	}
	return t1.Sub(t0).Seconds()
}

// readEvals reads every evals/NNNNNN/<set>/summary.parquet at ref, the
// starting policy first, then by iteration and set.
func readEvals(ctx context.Context, st artifacts.Store, ref string) ([]Eval, error) {
	out := []Eval{}
	for e, err := range st.ListObjects(ctx, ref, &artifacts.ListOptions{Prefix: "evals/"}) {
		if err != nil {
			return nil, err
		}
		parts := strings.Split(e.Path, "/")
		if len(parts) != 4 || parts[3] != "summary.parquet" {
			continue
		}
		n, err := strconv.Atoi(parts[1])
		if err != nil {
			continue
		}
		raw, err := readSmall(ctx, st, ref, e.Path)
		if err != nil {
			return nil, err
		}
		rows, err := tables.Read(bytes.NewReader(raw), int64(len(raw)), e.Path, tables.EvalSummary)
		if err != nil {
			return nil, err
		}
		ev := Eval{Iteration: n, Set: parts[2], Path: e.Path, Metrics: map[string]float64{}, Intervals: map[string][2]float64{}}
		for _, r := range rows {
			ev.Checkpoint, ev.Problems = r.Checkpoint, int(r.NumProblems)
			ev.N = max(ev.N, int(r.N))
			name := r.Metric
			if strings.HasSuffix(name, "@k") || strings.HasSuffix(name, "^k") {
				name = strings.TrimSuffix(name, "k") + strconv.Itoa(int(r.K))
			}
			if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
				continue
			}
			ev.Metrics[name] = r.Value
			if !math.IsNaN(r.CILow) && !math.IsNaN(r.CIHigh) && !math.IsInf(r.CILow, 0) && !math.IsInf(r.CIHigh, 0) {
				ev.Intervals[name] = [2]float64{r.CILow, r.CIHigh}
			}
		}
		out = append(out, ev)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Iteration != out[j].Iteration {
			return out[i].Iteration < out[j].Iteration
		}
		return out[i].Set < out[j].Set
	})
	return out, nil
}

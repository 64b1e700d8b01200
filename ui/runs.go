package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline"
)

// maxJSONObject bounds the small JSON objects read whole (metrics, state,
// events): a larger one is not what the engine writes.
const maxJSONObject = 8 << 20

// Lock describes the process holding a run.
type Lock = pipeline.LockHolder

// RunSummary is one row of /api/runs: a run, the process holding it, and
// its headline figures.
type RunSummary struct {
	pipeline.RunStatus
	// LastReward is the last iteration's mean reward (its train metrics'
	// reward.mean), nil when it has none.
	LastReward *float64 `json:"last_reward"`
	// Heldout is the headline evaluation figure, nil before any.
	Heldout *Headline `json:"heldout"`
}

// Headline is a run's headline evaluation: on its first eval set, the
// metric alarms follow (exact_pass@1 when every checkpoint has it, else
// pass@1), at the starting policy, the last checkpoint and the best one.
type Headline struct {
	Set    string  `json:"set"`
	Metric string  `json:"metric"`
	Base   float64 `json:"base"` // the starting policy (checkpoint 0); 0 with HasBase false
	// HasBase says whether the starting policy was evaluated: Gain is
	// over it.
	HasBase        bool    `json:"has_base"`
	Last           float64 `json:"last"`
	LastCheckpoint string  `json:"last_checkpoint"`
	Best           float64 `json:"best"`
	BestCheckpoint string  `json:"best_checkpoint"`
	// Gain is Last − Base, in points (×100), when HasBase.
	Gain float64 `json:"gain_points"`
}

// headline picks a run's headline evaluation; nil without evaluations.
func headline(evals []Eval) *Headline {
	if len(evals) == 0 {
		return nil
	}
	set := evals[0].Set
	var cps []Eval
	for _, e := range evals {
		if e.Set == set {
			cps = append(cps, e)
		}
	}
	metric := "exact_pass@1"
	for _, e := range cps {
		if _, ok := e.Metrics[metric]; !ok {
			metric = "pass@1"
			break
		}
	}
	h := &Headline{Set: set, Metric: metric}
	seen := false
	for _, e := range cps {
		v, ok := e.Metrics[metric]
		if !ok {
			continue
		}
		if e.Iteration == 0 {
			h.Base, h.HasBase = v, true
		}
		h.Last, h.LastCheckpoint = v, e.Checkpoint
		if !seen || v > h.Best {
			h.Best, h.BestCheckpoint = v, e.Checkpoint
		}
		seen = true
	}
	if !seen {
		return nil
	}
	if h.HasBase {
		h.Gain = 100 * (h.Last - h.Base)
	}
	return h
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
	Iteration int    `json:"iteration"`
	Commit    string `json:"commit"`
	// Dir is the iteration's directory on the run branch
	// (runs.IterationDir): the page links to it, never spells it.
	Dir     string    `json:"dir"`
	Date    time.Time `json:"date"`
	Tasks   []Task    `json:"tasks"`
	Seconds float64   `json:"seconds"` // time in tasks, summed
	// Train holds the numbers of iterations/NNNNNN/train_metrics.json,
	// nested objects flattened with dots ("reward.mean", "loss").
	Train map[string]float64 `json:"train,omitempty"`
	// NotComputed names the train metrics the trainer wrote as null, such
	// as kl at β = 0: shown as not computed, never as 0.
	NotComputed []string `json:"not_computed,omitempty"`
}

// Eval is one evaluated checkpoint on one eval set, as every reader of
// evaluations shows it (runs.ReadEvals).
type Eval = runs.Eval

// RunDetail is /api/runs/{run}.
type RunDetail struct {
	Run        string `json:"run"`
	Branch     string `json:"branch"`
	Commit     string `json:"commit"`
	ConfigHash string `json:"config_hash,omitempty"`
	// ConfigPath is where the run records its config (runs.ConfigPath).
	ConfigPath string             `json:"config_path"`
	State      *runs.State        `json:"state"` // nil before the first commit
	Lock       *Lock              `json:"lock"`
	Iterations []IterationSummary `json:"iterations"`
	Evals      []Eval             `json:"evals"`
	// Rescorings are the branches that rescored this run (runs.Rescorings).
	Rescorings []Rescoring `json:"rescorings"`
	// Trainer is the trainer's options as its last update applied them,
	// defaults filled in; nil when the last iteration's trainer records
	// none.
	Trainer *TrainerOptions `json:"trainer"`
	// Config is the run's effective pipeline config, defaults filled in
	// (Options.EffectiveConfig); nil without that function or a recorded
	// config.
	Config *EffectiveConfig `json:"config"`
}

// EffectiveConfig is a run's effective pipeline config: the recorded
// config at Path with every default filled in, as `rlpipe compare` diffs
// it and the run's trackers get it.
type EffectiveConfig struct {
	Path string `json:"path"`
	// Keys are the config's dotted keys and values; Error says why there
	// are none (a config this rlpipe no longer parses).
	Keys  map[string]string `json:"keys,omitempty"`
	Error string            `json:"error,omitempty"`
}

// readEffectiveConfig reads the config run recorded at commit and fills
// in its defaults with s's EffectiveConfig; nil without either.
func (s *Server) readEffectiveConfig(ctx context.Context, commit string) (*EffectiveConfig, error) {
	if s.opts.EffectiveConfig == nil {
		return nil, nil
	}
	raw, err := readSmall(ctx, s.st, commit, runs.ConfigPath)
	if err != nil || raw == nil {
		return nil, err
	}
	out := &EffectiveConfig{Path: runs.ConfigPath}
	if out.Keys, err = s.opts.EffectiveConfig(raw); err != nil {
		out.Keys, out.Error = nil, fmt.Sprintf("fill in the defaults of %s: %v", runs.ConfigPath, err)
	}
	return out, nil
}

// TrainerOptions are what a trainer records beside its checkpoint
// (iterations/NNNNNN/adapter/trainer_state.json, written by the embedded
// trainer): every option with the defaults applied, so the page shows the
// LoRA rank, β and the clip ε a config that leaves them out ran with.
type TrainerOptions struct {
	Iteration int             `json:"iteration"`
	Path      string          `json:"path"`
	BaseModel string          `json:"base_model,omitempty"`
	Options   json.RawMessage `json:"options"`
}

// trainerStateFile is the record the embedded trainer writes beside its
// adapter (trainers/embedded.StateFile).
const trainerStateFile = "trainer_state.json"

// readTrainerOptions reads the options the trainer of iteration n
// recorded at commit; nil when it recorded none (another trainer, a run
// without a train stage) or the record holds no options object.
func readTrainerOptions(ctx context.Context, st artifacts.Store, commit string, n int) (*TrainerOptions, error) {
	path := runs.AdapterPath(n) + "/" + trainerStateFile
	raw, err := readSmall(ctx, st, commit, path)
	if err != nil || raw == nil {
		return nil, err
	}
	var state struct {
		BaseModel string          `json:"base_model"`
		Options   json.RawMessage `json:"options"`
	}
	if json.Unmarshal(raw, &state) != nil || len(state.Options) == 0 || state.Options[0] != '{' {
		return nil, nil
	}
	return &TrainerOptions{Iteration: n, Path: path, BaseModel: state.BaseModel, Options: state.Options}, nil
}

// Rescoring is a branch that rescored a run, as the run view lists it.
type Rescoring struct {
	Branch     string `json:"branch"`
	Commit     string `json:"commit"`
	SpecDigest string `json:"spec_digest"`
	Iterations int    `json:"iterations"`
}

// RescoreCurves is /api/runs/{run}/rescorings/{branch}: the mean total
// reward of each iteration's rewards table, the run's (old) and the
// rescoring's (new), over the scored rows; null where an iteration has
// none.
type RescoreCurves struct {
	Run          string          `json:"run"`
	Branch       string          `json:"branch"`
	PerIteration []RescoredPoint `json:"per_iteration"`
}

// RescoredPoint is one iteration of RescoreCurves.
type RescoredPoint struct {
	Iteration int      `json:"iteration"`
	Old       *float64 `json:"old"`
	New       *float64 `json:"new"`
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
	Dir       string             `json:"dir"` // as in IterationSummary
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
	list, err := pipeline.ListRuns(ctx, st)
	if err != nil {
		return nil, err
	}
	out := make([]RunSummary, 0, len(list))
	for _, r := range list {
		row := RunSummary{RunStatus: r}
		if r.Iteration > 0 {
			tm, err := runs.ReadTrainMetrics(ctx, st, r.Commit, r.Iteration)
			if err != nil {
				return nil, fmt.Errorf("run %s: %w", r.Run, err)
			}
			for _, k := range []string{"reward.mean", "mean_reward"} {
				if v, ok := tm.Get(k); ok {
					row.LastReward = &v
					break
				}
			}
		}
		evals, err := runs.ReadEvals(ctx, st, r.Commit)
		if err != nil {
			return nil, fmt.Errorf("run %s: evaluations: %w", r.Run, err)
		}
		row.Heldout = headline(evals)
		out = append(out, row)
	}
	return out, nil
}

// runBranch checks a run name and returns its branch.
func runBranch(run string) (string, error) {
	branch := runs.Branch(run)
	if err := artifacts.ValidateBranchName(branch); err != nil {
		return "", kindf(artifacts.ErrInvalid, "%q is not a run name: a run is named by letters, digits, '_' and '-'", run)
	}
	return branch, nil
}

// runHead checks a run name and reads its branch: a bad name is
// ErrInvalid, a missing branch noRun, and a failed read the store's error,
// prefixed with the run when wrap is set.
func (s *Server) runHead(ctx context.Context, run string, wrap bool) (string, artifacts.Branch, error) {
	branch, err := runBranch(run)
	if err != nil {
		return "", artifacts.Branch{}, err
	}
	b, err := s.st.GetBranch(ctx, branch)
	switch {
	case errors.Is(err, artifacts.ErrNotFound):
		return "", artifacts.Branch{}, noRun(run, branch)
	case err != nil && wrap:
		return "", artifacts.Branch{}, fmt.Errorf("run %s: %w", run, err)
	}
	return branch, b, err
}

// runCommits walks a run's iteration commits, newest first
// (runs.History), calling fn with each commit and its iteration number;
// fn returns false to stop.
func runCommits(ctx context.Context, st artifacts.Store, run, head string, fn func(c artifacts.Commit, n int) bool) error {
	for c, err := range runs.History(ctx, st, run, head) {
		if err != nil {
			return err
		}
		if !fn(c.Commit, c.Iteration) {
			return nil
		}
	}
	return nil
}

// runDetail reads a run: state, lock, iterations and evaluations.
func (s *Server) runDetail(ctx context.Context, run string) (*RunDetail, error) {
	branch, b, err := s.runHead(ctx, run, true)
	if err != nil {
		return nil, err
	}
	out := &RunDetail{Run: run, Branch: branch, Commit: b.CommitID, ConfigPath: runs.ConfigPath, Iterations: []IterationSummary{}}
	if out.Lock, err = readLock(ctx, s.st, run); err != nil {
		return nil, err
	}
	if out.State, err = runs.ReadState(ctx, s.st, b.CommitID); err != nil {
		return nil, fmt.Errorf("run %s: %w", run, err)
	}
	var walkErr error
	err = runCommits(ctx, s.st, run, b.CommitID, func(c artifacts.Commit, n int) bool {
		if out.ConfigHash == "" {
			out.ConfigHash = c.Metadata[runs.MetaConfigHash]
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
	if n := len(out.Iterations); n > 0 {
		if out.Trainer, err = readTrainerOptions(ctx, s.st, b.CommitID, out.Iterations[n-1].Iteration); err != nil {
			return nil, fmt.Errorf("run %s: trainer options: %w", run, err)
		}
	}
	if out.Config, err = s.readEffectiveConfig(ctx, b.CommitID); err != nil {
		return nil, fmt.Errorf("run %s: config: %w", run, err)
	}
	if out.Evals, err = runs.ReadEvals(ctx, s.st, b.CommitID); err != nil {
		return nil, fmt.Errorf("run %s: evaluations: %w", run, err)
	}
	out.Rescorings = []Rescoring{}
	for r, err := range runs.Rescorings(ctx, s.st, run) {
		if err != nil {
			return nil, fmt.Errorf("run %s: rescorings: %w", run, err)
		}
		out.Rescorings = append(out.Rescorings, Rescoring{Branch: r.Branch, Commit: r.Commit, SpecDigest: r.Report.SpecDigest, Iterations: len(r.Report.Iterations)})
	}
	return out, nil
}

// rescoreCurves compares a run's rewards with a rescoring's, iteration by
// iteration, over the iterations the rescoring scored.
func (s *Server) rescoreCurves(ctx context.Context, run, branch string) (*RescoreCurves, error) {
	_, head, err := s.runHead(ctx, run, false)
	if err != nil {
		return nil, err
	}
	b, err := s.st.GetBranch(ctx, branch)
	if errors.Is(err, artifacts.ErrNotFound) {
		return nil, kindf(artifacts.ErrNotFound, "no branch %q in this store; /api/runs/%s lists the run's rescorings", branch, run)
	}
	if err != nil {
		return nil, err
	}
	rep, err := runs.ReadRescoreReport(ctx, s.st, b.CommitID)
	if err != nil {
		return nil, err
	}
	if rep == nil {
		return nil, kindf(artifacts.ErrNotFound, "branch %q is not a rescoring: it has no %s", branch, runs.RescoreReportPath)
	}
	// The run's side is the commit that was rescored, when the report
	// names it: iterations committed since are not on the rescoring.
	from := head.CommitID
	if rep.FromCommit != "" {
		from = rep.FromCommit
	}
	out := &RescoreCurves{Run: run, Branch: branch, PerIteration: []RescoredPoint{}}
	for _, n := range rep.Iterations {
		p := RescoredPoint{Iteration: n}
		for _, side := range []struct {
			ref string
			v   **float64
		}{{from, &p.Old}, {b.CommitID, &p.New}} {
			m, _, err := runs.ReadRewardMean(ctx, s.st, side.ref, n)
			if err != nil && !errors.Is(err, artifacts.ErrNotFound) {
				return nil, err
			}
			if err == nil {
				*side.v = number(m)
			}
		}
		out.PerIteration = append(out.PerIteration, p)
	}
	return out, nil
}

// number is f, or nil when it is not a finite number (JSON has no NaN).
func number(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}

// iterationSummary reads an iteration's task metrics and train metrics,
// once per commit.
func (s *Server) iterationSummary(ctx context.Context, c artifacts.Commit, n int) (IterationSummary, error) {
	if v, ok := s.cache.Get(c.ID); ok {
		return v, nil
	}
	it := IterationSummary{Iteration: n, Commit: c.ID, Dir: runs.IterationDir(n), Date: c.CreationDate.UTC(), Tasks: []Task{}}
	m, err := runs.ReadMetrics(ctx, s.st, c.ID, n)
	if err != nil {
		return it, err
	}
	if m != nil {
		it.Tasks = tasksOf(*m)
		for _, t := range it.Tasks {
			it.Seconds += t.Seconds
		}
	}
	tm, err := runs.ReadTrainMetrics(ctx, s.st, c.ID, n)
	if err != nil {
		return it, err
	}
	if tm != nil {
		it.Train, it.NotComputed = tm.Values, tm.NotComputed
	}
	s.cache.Put(c.ID, it)
	return it, nil
}

// tasksOf lists an iteration's tasks in the order of the loop's stages,
// then by name.
func tasksOf(m runs.IterationMetrics) []Task {
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

// findIteration returns the commit of iteration n of a run.
func (s *Server) findIteration(ctx context.Context, run string, n int) (artifacts.Commit, error) {
	_, b, err := s.runHead(ctx, run, true)
	if err != nil {
		return artifacts.Commit{}, err
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
	out := &IterationDetail{Run: run, Iteration: n, Commit: c.ID, Dir: runs.IterationDir(n), Date: c.CreationDate.UTC(), Message: c.Message,
		Metadata: c.Metadata, Tasks: append([]Task(nil), sum.Tasks...), Seconds: sum.Seconds, Train: sum.Train, NotComputed: sum.NotComputed, Artifacts: []Artifact{}}
	raw, err := readSmall(ctx, s.st, c.ID, runs.EventsPath(n))
	if err != nil {
		return nil, err
	}
	out.Wall = placeTasks(out.Tasks, raw)
	// The timeline reads top to bottom in the order the tasks started;
	// tasks the log does not place keep the stages' order, after them.
	sort.SliceStable(out.Tasks, func(i, j int) bool {
		a, b := out.Tasks[i].Start, out.Tasks[j].Start
		return a != nil && (b == nil || *a < *b)
	})
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
	evs, t0, t1 := pipeline.ParseEventLog(raw)
	if len(evs) == 0 {
		return 0
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

package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/rlpipe/rlpipe/artifacts/runs"
)

// Stages are the tasks of one RL iteration, wired by Loop: the four
// slots, and the steps around them.
//
//	sample:   dataset            → prompts         params {cursor, count, iteration}
//	generate: prompts, policy    → trajectories    params {iteration, policy_iteration, staleness}
//	reward:   trajectories, prompts → rewards      params {iteration}
//	train:    rewards, trajectories, prompts, policy[, what steps before train write] → adapter (directory), metrics
//
// The policy input is the adapter directory of an earlier iteration, or
// Loop.InitialPolicy (absent when that is nil: the base model). Steps
// (the advantages a trainer trains on, the training health, the
// evaluation of checkpoints, see Step) are wired from what they declare.
type Stages struct {
	Sample, Generate, Reward, Train *Task
	// FilterGroups merges an iteration's generation rounds when
	// LoopConfig.MaxGenBatches is set (FilterGroupsTask).
	FilterGroups *Task
	// Steps are the iteration's other tasks, placed by their After and
	// Before (TaskOrder).
	Steps []Step
}

// Tasks lists the stages' tasks that are set, in TaskOrder, each once:
// what a Worker needs to run any of the loop's calls.
func (s Stages) Tasks() []*Task {
	var out []*Task
	for _, name := range TaskOrder(s.Steps) {
		t := s.slot(name)
		if i := slices.IndexFunc(s.Steps, func(x Step) bool { return x.Name == name }); i >= 0 {
			t = s.Steps[i].Task
		}
		if t != nil && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if s.FilterGroups != nil {
		out = append(out, s.FilterGroups)
	}
	return out
}

// Output names the stages must declare.
const (
	OutPrompts      = "prompts"
	OutTrajectories = "trajectories"
	OutRewards      = "rewards"
	OutAdvantages   = "advantages"
	OutAdapter      = "adapter"
	OutMetrics      = "metrics"
)

// LoopConfig shapes the loop.
type LoopConfig struct {
	// Iterations is the last iteration to run (counting from 1).
	Iterations int
	// BatchSize is how many prompts each iteration consumes.
	BatchSize int
	// MaxStaleness bounds how many policy updates a sample may lag: 0 is
	// on-policy and sequential; 1 generates iteration N+1 with the policy
	// of N-1 while iteration N trains.
	MaxStaleness int
	// Dataset is the prompts table the sampler reads.
	Dataset Artifact
	// InitialPolicy is the adapter to start from; nil means the base model.
	InitialPolicy *Artifact
	// OnCommit, when set, is called after each iteration commits (to
	// report it); it must not block for long.
	OnCommit func(iteration int)
	// MaxGenBatches, when > 0, turns on dynamic sampling (filter.go):
	// up to this many generation rounds an iteration, until its batch
	// holds BatchSize groups whose rewards differ. 0 is off.
	MaxGenBatches int
	// Stop, when set, is called after each commit; returning true ends the
	// loop early (used by tests to interrupt at a chosen point).
	Stop func(iteration int) bool
}

func (c LoopConfig) validate(s Stages) error {
	switch {
	case c.Iterations < 0 || c.BatchSize <= 0:
		return fmt.Errorf("%w: iterations must be ≥ 0 and batch_size > 0", ErrConfig)
	case c.MaxStaleness < 0:
		return fmt.Errorf("%w: overlap.max_staleness must be ≥ 0", ErrConfig)
	case s.Sample == nil || s.Generate == nil || s.Reward == nil || s.Train == nil:
		return fmt.Errorf("%w: the loop needs sample, generate, reward and train stages", ErrConfig)
	case c.Dataset.Path == "":
		return fmt.Errorf("%w: the loop needs a dataset", ErrConfig)
	case c.MaxGenBatches < 0:
		return fmt.Errorf("%w: filter_groups.max_num_gen_batches must be ≥ 1", ErrConfig)
	case c.MaxGenBatches > 0 && s.FilterGroups == nil:
		return fmt.Errorf("%w: dynamic sampling needs the stages' FilterGroups task (pipeline.FilterGroupsTask)", ErrConfig)
	}
	return CheckSteps(s)
}

// Loop runs (or resumes) the RL loop up to cfg.Iterations. It returns the
// state after the last committed iteration.
func (r *Run) Loop(ctx context.Context, cfg LoopConfig, st Stages) (runs.State, error) {
	if err := cfg.validate(st); err != nil {
		return runs.State{}, err
	}
	var state runs.State
	resumed, err := r.LoadState(ctx, &state)
	if err != nil {
		return state, err
	}
	if !resumed {
		state = runs.State{Adapters: map[string]string{}, Seed: r.opts.Seed}
	} else {
		r.events.emit(Event{Kind: EventResumed, Iteration: state.Iteration + 1})
	}
	if state.Adapters == nil {
		state.Adapters = map[string]string{}
	}
	// An iteration's work branch goes once every iteration that may read
	// its outputs (the next max_staleness+1) has committed; those a killed
	// process left behind go now if their iteration is committed.
	if err := r.findWork(ctx); err != nil {
		return state, err
	}
	readers := cfg.MaxStaleness + 1
	defer func() { r.retireWork(context.WithoutCancel(ctx), state.Iteration) }()
	trains := map[int]*Node{}
	policy := func(k int) (Artifact, bool) {
		if k <= 0 {
			if cfg.InitialPolicy == nil {
				return Artifact{}, false
			}
			return *cfg.InitialPolicy, true
		}
		if n, ok := trains[k]; ok {
			return n.Output(OutAdapter), true
		}
		if p, ok := state.Adapters[strconv.Itoa(k)]; ok {
			return StoreDir(r.branch, p), true
		}
		return Artifact{}, false
	}
	type pending struct {
		it     *Iteration
		cursor int
		train  *Node
	}
	var queue []pending
	// On a failure the iterations already built must still finish (or be
	// cancelled) before Loop returns: their goroutines write to the store.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fails := &failures{cancel: map[int]context.CancelCauseFunc{}}
	drain := func() {
		cancel()
		for _, p := range queue {
			_ = p.it.Wait(context.Background())
		}
	}
	commit := func(p pending) error {
		if err := p.it.Wait(lctx); err != nil {
			// The tasks that failed, not those their failure cancelled.
			if ferr := fails.err(); ferr != nil {
				return ferr
			}
			return err
		}
		next := runs.State{Iteration: p.it.N, Cursor: p.cursor, Seed: state.Seed, Adapters: map[string]string{}}
		for k, v := range state.Adapters {
			if i, _ := strconv.Atoi(k); i > p.it.N-cfg.MaxStaleness-2 {
				next.Adapters[k] = v
			}
		}
		ad, err := p.train.Result(OutAdapter)
		if err != nil {
			return err
		}
		next.Adapters[strconv.Itoa(p.it.N)] = ad.Path
		m := p.it.metrics()
		if err := r.putJSON(lctx, runs.MetricsPath(p.it.N), m); err != nil {
			return err
		}
		if _, err := p.it.Commit(lctx, next, nil); err != nil {
			return err
		}
		fails.committed(p.it.N)
		state = next
		r.retireWork(lctx, p.it.N-readers)
		return nil
	}
	// commitDownTo commits the oldest iterations until at most keep are
	// in flight; stop reports that cfg.Stop ended the loop.
	commitDownTo := func(keep int) (stop bool, err error) {
		for len(queue) > keep {
			if err := commit(queue[0]); err != nil {
				drain()
				return true, err
			}
			queue = queue[1:]
			if cfg.OnCommit != nil {
				cfg.OnCommit(state.Iteration)
			}
			if cfg.Stop != nil && cfg.Stop(state.Iteration) {
				drain()
				return true, nil
			}
		}
		return false, nil
	}
	cursor := state.Cursor
	order := TaskOrder(st.Steps)
	steps := map[string]Step{}
	for _, s := range st.Steps {
		steps[s.Name] = s
	}
	// Generations take the generator in iteration order: with overlap,
	// iteration n+1's prompts can be ready first, and a generation that
	// jumped the queue would hold up iteration n's training.
	var prevGen *Node
	for n := state.Iteration + 1; n <= cfg.Iterations; n++ {
		if fails.any() {
			break // no iteration from the failed one on can commit
		}
		it := r.Iteration(n)
		it.work = WorkBranch(r.branch, n)
		ictx := fails.start(lctx, it)
		// drawn counts the prompts the iteration takes from the dataset:
		// a batch, or every round's with dynamic sampling.
		drawn := cfg.BatchSize
		var genRound func(call, dir string, prompts Artifact) *Node
		// The slots and the steps start in TaskOrder; a step reads the
		// outputs of the slots and steps before it, and a slot also gets
		// the outputs of the steps that feed it.
		u := upstream{nodes: map[string]*Node{}, start: cfg.InitialPolicy}
		feed := func(slot string, in map[string]Artifact) map[string]Artifact {
			for _, s := range st.Steps {
				if node, ok := u.nodes[s.Name]; ok && s.Before == slot {
					for _, o := range s.Outputs {
						in[o] = node.Output(o)
					}
				}
			}
			return in
		}
		for _, name := range order {
			switch name {
			case SlotSample:
				u.nodes[name] = it.Go(ictx, st.Sample, Call{Dir: cfg.roundDir(n),
					Inputs: feed(name, map[string]Artifact{"dataset": cfg.Dataset}),
					Params: map[string]int{"cursor": cursor, "count": cfg.BatchSize, "iteration": n},
				})
			case SlotGenerate:
				pk := n - 1 - cfg.MaxStaleness
				genIn := map[string]Artifact{"prompts": u.nodes[SlotSample].Output(OutPrompts)}
				if a, ok := policy(pk); ok {
					genIn["policy"] = a
				}
				genParams := map[string]int{"iteration": n, "policy_iteration": max(pk, 0), "staleness": n - 1 - max(pk, 0)}
				prevGen = it.Go(ictx, st.Generate, Call{Inputs: feed(name, genIn), After: prevGen, Dir: cfg.roundDir(n), Params: genParams})
				u.nodes[name] = prevGen
				// A refill round generates as round 0 does, in its own
				// directory, after the generation before it.
				genRound = func(call, dir string, prompts Artifact) *Node {
					in := maps.Clone(genIn)
					in["prompts"] = prompts
					prevGen = it.Go(ictx, st.Generate, Call{Name: call, Dir: dir, Inputs: in, After: prevGen, Params: genParams})
					return prevGen
				}
			case SlotReward:
				u.nodes[name] = it.Go(ictx, st.Reward, Call{Dir: cfg.roundDir(n), Inputs: feed(name, map[string]Artifact{
					"trajectories": u.nodes[SlotGenerate].Output(OutTrajectories), "prompts": u.nodes[SlotSample].Output(OutPrompts)}),
					Params: map[string]int{"iteration": n}})
				if cfg.MaxGenBatches > 0 {
					rounds, err := r.refill(ictx, it, cfg, st, u.nodes, cursor, genRound)
					if err != nil {
						cancel()
						_ = it.Wait(context.Background())
						drain()
						return state, err
					}
					drawn = rounds * cfg.BatchSize
				}
			case SlotTrain:
				trainIn := map[string]Artifact{"rewards": u.nodes[SlotReward].Output(OutRewards),
					"trajectories": u.nodes[SlotGenerate].Output(OutTrajectories), "prompts": u.nodes[SlotSample].Output(OutPrompts)}
				if a, ok := policy(n - 1); ok {
					trainIn["policy"] = a
				}
				u.nodes[name] = it.Go(ictx, st.Train, Call{Inputs: feed(name, trainIn), Params: map[string]int{"iteration": n}})
			default:
				if s := steps[name]; s.When == nil || s.When(n, cfg.Iterations) {
					u.goStep(ictx, it, s, n)
				}
			}
		}
		cursor += drawn
		train := u.nodes[SlotTrain]
		trains[n] = train
		delete(trains, n-cfg.MaxStaleness-2) // no later iteration reads it
		queue = append(queue, pending{it: it, cursor: cursor, train: train})
		// At most max_staleness iterations stay in flight behind this one.
		if stop, err := commitDownTo(cfg.MaxStaleness); stop || err != nil {
			return state, err
		}
	}
	_, err = commitDownTo(0)
	return state, err
}

// roundDir is where round 0 of iteration n writes the slots' outputs:
// the iteration's directory ("") without dynamic sampling, else its
// first round's.
func (c LoopConfig) roundDir(n int) string {
	if c.MaxGenBatches == 0 {
		return ""
	}
	return runs.RoundDir(n, 0)
}

// errStopped is the cause the loop cancels a task's context with when a
// task of its iteration, or of an earlier one, failed.
var errStopped = errors.New("stopped")

// failures stops the loop's work at the first failed task. An iteration
// with a failed task never commits, and neither does a later one
// (iterations commit in order), so the moment a task fails — after its
// retries — the tasks of its iteration and of every later one in flight
// are cancelled (a running attempt with them: an HTTP request, a
// command's process group, a Temporal workflow) instead of being waited
// for. Earlier iterations go on and commit: what they finish is kept.
type failures struct {
	mu     sync.Mutex
	first  int     // the earliest iteration with a failed task; 0: none
	failed []*Node // in the order they failed
	cancel map[int]context.CancelCauseFunc
}

// start makes it report its failures here and returns the context its
// tasks run under.
func (f *failures) start(ctx context.Context, it *Iteration) context.Context {
	ictx, cancel := context.WithCancelCause(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancel[it.N] = cancel
	it.onFail = f.add
	return ictx
}

// add records n's failure and cancels the iterations it stops.
func (f *failures) add(n *Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = append(f.failed, n)
	if f.first == 0 || n.it.N < f.first {
		f.first = n.it.N
	}
	cause := fmt.Errorf("%w: task %s (%s) failed", errStopped, n.name, n.it.Group)
	for k, c := range f.cancel {
		if k >= f.first {
			c(cause)
		}
	}
}

// committed releases the context of an iteration that committed.
func (f *failures) committed(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.cancel[n]; ok {
		c(nil)
		delete(f.cancel, n)
	}
}

// any reports whether a task failed.
func (f *failures) any() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first > 0
}

// err joins the failed tasks' errors, the earliest iteration's first,
// once each has ended; nil when none failed.
func (f *failures) err() error {
	f.mu.Lock()
	nodes := slices.Clone(f.failed)
	f.mu.Unlock()
	slices.SortStableFunc(nodes, func(a, b *Node) int { return a.it.N - b.it.N })
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		<-n.done
		errs[i] = n.err
	}
	return errors.Join(errs...)
}

func (r *Run) putJSON(ctx context.Context, path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = r.store.PutObject(ctx, r.branch, path, bytes.NewReader(append(b, '\n')), nil)
	return err
}

// metrics summarise the iteration's nodes.
func (it *Iteration) metrics() runs.IterationMetrics {
	it.mu.Lock()
	nodes := append([]*Node(nil), it.nodes...)
	it.mu.Unlock()
	m := runs.IterationMetrics{Iteration: it.N, Tasks: map[string]runs.TaskMetrics{}}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].name < nodes[j].name })
	for _, n := range nodes {
		<-n.done
		m.Tasks[n.name] = runs.TaskMetrics{Attempts: n.attempts, Cached: n.cached, Seconds: n.elapsed.Seconds(), Key: n.key}
	}
	return m
}

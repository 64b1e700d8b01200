package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/rlpipe/rlpipe/artifacts/runs"
)

// Stages are the tasks of one RL iteration, wired by Loop:
//
//	sample:   dataset            → prompts         params {cursor, count, iteration}
//	generate: prompts, policy    → trajectories    params {iteration, policy_iteration, staleness}
//	reward:   trajectories, prompts → rewards      params {iteration}
//	advantages (optional): trajectories, rewards → advantages   params {iteration}
//	train:    rewards, trajectories, prompts, policy[, advantages] → adapter (directory), metrics
//
//	eval-generate: prompts (the eval set), policy → trajectories      params {checkpoint}
//	eval:          prompts, trajectories, policy → samples, summary   params {checkpoint}
//
// The policy input is the adapter directory of an earlier iteration, or
// Loop.InitialPolicy (absent when that is nil: the base model). Eval is
// optional: with LoopConfig.Eval.Every > 0 it evaluates the starting
// policy in the first iteration and every Every-th checkpoint (and the
// last), writing to evals/NNNNNN/<set>/ (000000 is the starting policy).
type Stages struct {
	Sample, Generate, Reward, Train *Task
	// Advantages, optional, computes what the train task trains on
	// between reward and train: inputs trajectories and rewards (those
	// the train task gets), output "advantages" (OutAdvantages), handed
	// to the train task as its "advantages" input. The train task must
	// then not declare an output of the same file.
	Advantages *Task
	// EvalGenerate samples the eval set from a checkpoint; Eval scores and
	// summarises the samples. They are separate so that a new metric or
	// reward reuses stored generations.
	EvalGenerate, Eval *Task
	// Health, optional, summarises each iteration's training health:
	// inputs trajectories, rewards and the train stage's metrics.
	Health *Task
}

// Tasks lists the stages' tasks that are set, in stage order: what a
// Worker needs to run any of the loop's calls.
func (s Stages) Tasks() []*Task {
	var out []*Task
	for _, t := range []*Task{s.Sample, s.Generate, s.Reward, s.Advantages, s.Train, s.EvalGenerate, s.Eval, s.Health} {
		if t != nil {
			out = append(out, t)
		}
	}
	return out
}

// EvalConfig says when and on what the loop evaluates checkpoints.
type EvalConfig struct {
	// Every evaluates every Every-th iteration's adapter; 0 turns
	// evaluation off.
	Every int
	// Set is the eval set, a prompts table; Name names it ("heldout").
	Set  Artifact
	Name string
}

// Evaluate adds a checkpoint's evaluation to an iteration: the generate
// and score calls of st on the eval set, with the checkpoint's adapter
// (nil: the base model), writing to EvalDir(checkpoint, set). suffix
// distinguishes call names within one iteration ("-start" for the
// starting policy). It returns the score call.
func Evaluate(ctx context.Context, it *Iteration, st Stages, evalSet Artifact, adapter *Artifact, checkpoint int, set, suffix string) *Node {
	in := map[string]Artifact{"prompts": evalSet}
	if adapter != nil {
		in["policy"] = *adapter
	}
	params := map[string]int{"checkpoint": checkpoint}
	dir := runs.EvalDir(checkpoint, set)
	gen := it.Go(ctx, st.EvalGenerate, Call{Name: "eval-generate" + suffix, Inputs: in, Params: params, Dir: dir})
	scoreIn := map[string]Artifact{"prompts": evalSet, "trajectories": gen.Output("trajectories")}
	if adapter != nil {
		scoreIn["policy"] = *adapter
	}
	return it.Go(ctx, st.Eval, Call{Name: "eval" + suffix, Inputs: scoreIn, Params: params, Dir: dir})
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
	// Eval evaluates checkpoints (Stages.Eval must be set when Every > 0).
	Eval EvalConfig
	// OnCommit, when set, is called after each iteration commits (to
	// report it); it must not block for long.
	OnCommit func(iteration int)
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
	case s.Advantages != nil && clash(s.Advantages, s.Train) != "":
		return fmt.Errorf("%w: the advantages task and the train task both write %s; the train task reads the advantages as its %q input", ErrConfig, clash(s.Advantages, s.Train), OutAdvantages)
	case c.Eval.Every < 0:
		return fmt.Errorf("%w: eval.every must be ≥ 0", ErrConfig)
	case c.Eval.Every > 0 && (s.Eval == nil || s.EvalGenerate == nil || c.Eval.Set.Path == ""):
		return fmt.Errorf("%w: evaluating every %d iterations needs the eval stages and an eval set", ErrConfig, c.Eval.Every)
	}
	return nil
}

// clash is a file that both a and b declare as an output ("" for none).
func clash(a, b *Task) string {
	for _, x := range a.Outputs {
		for _, y := range b.Outputs {
			if x.file() == y.file() {
				return x.file()
			}
		}
	}
	return ""
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
	// Generations take the generator in iteration order: with overlap,
	// iteration n+1's prompts can be ready first, and a generation that
	// jumped the queue would hold up iteration n's training.
	var prevGen *Node
	for n := state.Iteration + 1; n <= cfg.Iterations; n++ {
		if fails.any() {
			break // no iteration from the failed one on can commit
		}
		it := r.Iteration(n)
		ictx := fails.start(lctx, it)
		sample := it.Go(ictx, st.Sample, Call{
			Inputs: map[string]Artifact{"dataset": cfg.Dataset},
			Params: map[string]int{"cursor": cursor, "count": cfg.BatchSize, "iteration": n},
		})
		cursor += cfg.BatchSize
		pk := n - 1 - cfg.MaxStaleness
		genIn := map[string]Artifact{"prompts": sample.Output(OutPrompts)}
		if a, ok := policy(pk); ok {
			genIn["policy"] = a
		}
		gen := it.Go(ictx, st.Generate, Call{Inputs: genIn, After: prevGen,
			Params: map[string]int{"iteration": n, "policy_iteration": max(pk, 0), "staleness": n - 1 - max(pk, 0)}})
		prevGen = gen
		rew := it.Go(ictx, st.Reward, Call{Inputs: map[string]Artifact{"trajectories": gen.Output(OutTrajectories), "prompts": sample.Output(OutPrompts)},
			Params: map[string]int{"iteration": n}})
		trainIn := map[string]Artifact{"rewards": rew.Output(OutRewards), "trajectories": gen.Output(OutTrajectories),
			"prompts": sample.Output(OutPrompts)}
		if a, ok := policy(n - 1); ok {
			trainIn["policy"] = a
		}
		if st.Advantages != nil {
			adv := it.Go(ictx, st.Advantages, Call{Inputs: map[string]Artifact{"trajectories": gen.Output(OutTrajectories),
				"rewards": rew.Output(OutRewards)}, Params: map[string]int{"iteration": n}})
			trainIn[OutAdvantages] = adv.Output(OutAdvantages)
		}
		train := it.Go(ictx, st.Train, Call{Inputs: trainIn, Params: map[string]int{"iteration": n}})
		if st.Health != nil {
			it.Go(ictx, st.Health, Call{Inputs: map[string]Artifact{"trajectories": gen.Output(OutTrajectories),
				"rewards": rew.Output(OutRewards), "metrics": train.Output(OutMetrics)}, Params: map[string]int{"iteration": n}})
		}
		if ev := cfg.Eval; ev.Every > 0 {
			set := ev.Name
			if set == "" {
				set = "heldout"
			}
			if n == 1 {
				var start *Artifact
				if a, ok := policy(0); ok {
					start = &a
				}
				Evaluate(ictx, it, st, ev.Set, start, 0, set, "-start")
			}
			if n%ev.Every == 0 || n == cfg.Iterations {
				a := train.Output(OutAdapter)
				Evaluate(ictx, it, st, ev.Set, &a, n, set, "")
			}
		}
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

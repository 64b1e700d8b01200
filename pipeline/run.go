package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
)

// RunOptions configure a run. Nil means defaults where noted.
type RunOptions struct {
	// Name of the run; its branch is runs-<name> unless Branch is set.
	Name string
	// Branch overrides the run's branch (a rescoring writes to its own).
	Branch string
	// From is the ref a new run branches from (default: the default branch).
	From string
	// Envs are the task environments by name.
	Envs map[string]Settings
	// Machine is what the local executor hands out (default: this machine's
	// cores and memory, no GPU).
	Machine *Machine
	// Seed makes task seeds deterministic.
	Seed uint64
	// ConfigHash is recorded in every iteration commit and in provenance.
	ConfigHash string
	// Config is the run's effective config as its driver reads it, secrets
	// redacted (config.Config.YAML). The first iteration this Run commits
	// records it at runs.ConfigPath, unless the branch holds exactly it
	// already; nil records nothing.
	Config []byte
	// NoCache runs every task even when its key matches.
	NoCache bool
	// WorkDir holds task scratch directories (default: the OS temp dir).
	// Open removes those that killed processes left there.
	WorkDir string
	// Logger receives events and task logs.
	Logger zerolog.Logger
	// OnEvent, when set, sees every event (a progress display).
	OnEvent func(Event)
	// LockTTL is how long a lock held by a process on another host stays
	// valid without a heartbeat (default 1 minute).
	LockTTL time.Duration
	// Executor runs task calls the cache did not answer (default: the
	// local executor, in this process under Machine's resources).
	Executor Executor
}

// Run is one durable run: a branch in the store, a lock, loop state and
// the executor that runs its tasks.
type Run struct {
	store  artifacts.Store
	name   string
	branch string
	opts   RunOptions
	pool   *pool
	cache  *cache
	memo   *memoizer
	// objects keeps local copies of objects when the store is remote.
	objects *objectCache
	events  *eventLog
	lock    *runLock
	// executor runs the calls the cache does not answer.
	executor Executor
	warm     warmPools

	commitMu  sync.Mutex
	committed map[int]chan struct{} // closed when the iteration committed
	// works are the work branches of iterations not yet retired, by
	// iteration (work.go).
	works map[int]string
	// configStaged: RunOptions.Config is on the branch (commits are
	// serial, so only the committing goroutine reads or sets it).
	configStaged bool
}

// Open starts or resumes a run: it takes the run's lock (refusing if
// another live process holds it), creates the run branch if needed, and
// makes sure the cache and lock branches exist.
func Open(ctx context.Context, st artifacts.Store, opts RunOptions) (*Run, error) {
	if opts.Name == "" {
		return nil, fmt.Errorf("%w: a run needs a name", ErrConfig)
	}
	branch := runs.Branch(opts.Name)
	if opts.Branch != "" {
		branch = opts.Branch
	}
	if err := artifacts.ValidateBranchName(branch); err != nil {
		return nil, fmt.Errorf("%w: run name %q: %v", ErrConfig, opts.Name, err)
	}
	for name, s := range opts.Envs {
		if err := defaultSettings.Merge(s).Validate(); err != nil {
			return nil, fmt.Errorf("environment %s: %w", name, err)
		}
	}
	repo, err := st.Repository(ctx)
	if err != nil {
		return nil, err
	}
	from := opts.From
	if from == "" {
		from = repo.DefaultBranch
	}
	for _, b := range []string{CacheBranch, LockBranch} {
		if err := ensureBranch(ctx, st, b, repo.DefaultBranch); err != nil {
			return nil, err
		}
	}
	m := opts.Machine
	if m == nil {
		this := ThisMachine()
		m = &this
	}
	r := &Run{
		store: st, name: opts.Name, branch: branch, opts: opts,
		pool:      newPool(*m),
		cache:     &cache{store: st},
		events:    newEventLog(opts.Name, opts.Logger),
		committed: map[int]chan struct{}{},
		works:     map[int]string{},
	}
	r.memo = &memoizer{store: st, events: r.events}
	sweepTaskDirs(opts.WorkDir, opts.Logger)
	r.executor = opts.Executor
	if r.executor == nil {
		r.executor = localExecutor{r}
	} else {
		// Tasks run elsewhere, so the store is a shared, remote one: the
		// tasks this process runs itself (Task.Bookkeeping) keep local
		// copies of what they read and write.
		r.objects = newObjectCache(opts.WorkDir)
	}
	if opts.OnEvent != nil {
		r.events.subscribe(opts.OnEvent)
	}
	lock, err := acquireLock(ctx, st, opts.Name, opts.LockTTL)
	if err != nil {
		return nil, err
	}
	r.lock = lock
	if err := ensureBranch(ctx, st, branch, from); err != nil {
		lock.release(context.WithoutCancel(ctx))
		return nil, err
	}
	return r, nil
}

func ensureBranch(ctx context.Context, st artifacts.Store, name, from string) error {
	if _, err := st.GetBranch(ctx, name); err == nil {
		return nil
	} else if !errors.Is(err, artifacts.ErrNotFound) {
		return err
	}
	if _, err := st.CreateBranch(ctx, name, from); err != nil && !errors.Is(err, artifacts.ErrBranchExists) {
		return fmt.Errorf("create branch %s: %w", name, err)
	}
	return nil
}

// ThisMachine is what this machine offers the executor: its cores and
// memory, no GPU.
func ThisMachine() Machine {
	return Machine{CPU: float64(runtime.NumCPU()), MemoryMB: memoryMB()}
}

func memoryMB() int {
	b, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		var kb int
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			return kb / 1024
		}
	}
	return 4096
}

// Name is the run's name; Branch its branch.
func (r *Run) Name() string   { return r.name }
func (r *Run) Branch() string { return r.branch }

// Store is the store the run writes to.
func (r *Run) Store() artifacts.Store { return r.store }

// Close releases the run's lock.
func (r *Run) Close() error {
	r.objects.close()
	return r.lock.release(context.Background())
}

// LoadState decodes the loop state of the last committed iteration into
// v. ok is false for a run that has committed no iteration yet.
func (r *Run) LoadState(ctx context.Context, v any) (ok bool, err error) {
	rc, _, err := r.store.GetObject(ctx, r.branch+"@", runs.StatePath)
	if errors.Is(err, artifacts.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("load state of run %s: %w", r.name, err)
	}
	defer rc.Close()
	if err := json.NewDecoder(rc).Decode(v); err != nil {
		return false, fmt.Errorf("load state of run %s: %s: %w", r.name, runs.StatePath, err)
	}
	return true, nil
}

// stageConfig stages RunOptions.Config, once per Run, unless the branch
// holds exactly it already.
func (r *Run) stageConfig(ctx context.Context) error {
	if r.opts.Config == nil || r.configStaged {
		return nil
	}
	cur, err := artifacts.ReadObject(ctx, r.store, r.branch, runs.ConfigPath)
	if err != nil {
		return err
	}
	if !bytes.Equal(cur, r.opts.Config) {
		if _, err := r.store.PutObject(ctx, r.branch, runs.ConfigPath, bytes.NewReader(r.opts.Config), &artifacts.PutOptions{ContentType: "application/yaml"}); err != nil {
			return err
		}
	}
	r.configStaged = true
	return nil
}

// Iteration is one iteration's DAG of tasks. Add tasks with Go; they run
// as soon as their inputs are ready, independent ones concurrently.
type Iteration struct {
	run   *Run
	N     int
	Group string
	Dir   string
	// Message is the commit's message (default "iteration N"); a DAG
	// that is not a loop iteration says what it is.
	Message string
	mu      sync.Mutex
	nodes   []*Node
	// onFail, when set, is called once with each node that fails on its
	// own (not for a failed input, not once its context is cancelled), as
	// soon as its executor reports the failure and before the node's Wait
	// returns — its error may not be set yet: Loop's hook to stop the work
	// that failure makes useless.
	onFail func(*Node)
	// work is the branch the tasks stage their outputs on until the
	// commit moves them in (a loop's iteration, work.go); "" stages them
	// on the run branch. workMade: it exists.
	work     string
	workMu   sync.Mutex
	workMade bool
}

// Iteration starts building iteration n. Several iterations may be in
// flight at once (overlap); they commit in order.
func (r *Run) Iteration(n int) *Iteration {
	r.commitMu.Lock()
	if _, ok := r.committed[n]; !ok {
		r.committed[n] = make(chan struct{})
	}
	r.commitMu.Unlock()
	return &Iteration{run: r, N: n, Group: fmt.Sprintf("iteration %06d", n), Dir: runs.IterationDir(n)}
}

// Node is one task call in an iteration; its outputs are futures.
type Node struct {
	it       *Iteration
	task     *Task
	call     Call
	name     string
	stage    string
	done     chan struct{}
	started  chan struct{} // closed at the first attempt, a cache hit or the end
	once     sync.Once
	outputs  map[string]Artifact
	key      string
	cached   bool
	attempts int
	elapsed  time.Duration
	err      error
	failed   atomic.Bool // its failure was passed to the iteration (fail)
}

// Output returns a future for one of the node's outputs, to pass as an
// input to another call.
func (n *Node) Output(name string) Artifact { return Artifact{node: n, output: name} }

// Wait blocks until the node finished and returns its error.
func (n *Node) Wait(ctx context.Context) error {
	select {
	case <-n.done:
		return n.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Result returns a finished node's output.
func (n *Node) Result(name string) (Artifact, error) {
	<-n.done
	if n.err != nil {
		return Artifact{}, n.err
	}
	a, ok := n.outputs[name]
	if !ok {
		return Artifact{}, fmt.Errorf("task %s has no output %q", n.name, name)
	}
	return a, nil
}

// markStarted records that the node started an attempt, hit the cache
// or ended, releasing the calls ordered After it.
func (n *Node) markStarted() { n.once.Do(func() { close(n.started) }) }

// Cached reports whether the node reused a cached result; Key is its cache key.
func (n *Node) Cached() bool { <-n.done; return n.cached }
func (n *Node) Key() string  { <-n.done; return n.key }

// Go adds a call of t to the iteration and starts it once its inputs are
// ready. stage labels the node in events ("generate", "reward"...).
func (it *Iteration) Go(ctx context.Context, t *Task, c Call) *Node {
	name := c.Name
	if name == "" {
		name = t.Name
	}
	n := &Node{it: it, task: t, call: c, name: name, stage: t.Name, done: make(chan struct{}), started: make(chan struct{})}
	it.mu.Lock()
	it.nodes = append(it.nodes, n)
	it.mu.Unlock()
	go n.exec(ctx)
	return n
}

// Wait waits for every node and returns their errors joined.
func (it *Iteration) Wait(ctx context.Context) error {
	it.mu.Lock()
	nodes := append([]*Node(nil), it.nodes...)
	it.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		if err := n.Wait(ctx); err != nil && !errors.Is(err, ErrUpstream) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Commit waits for the iteration's tasks and for the previous
// iteration's commit, links the outputs its tasks staged on its work
// branch into the run branch (a loop's iteration, work.go), stages the
// loop state (unless state is nil), and commits the run branch with metadata naming the iteration, the config
// hash and each task's cache key. The commit is the durability point of
// the loop state.
func (it *Iteration) Commit(ctx context.Context, state any, meta map[string]string) (artifacts.Commit, error) {
	r := it.run
	if err := it.Wait(ctx); err != nil {
		return artifacts.Commit{}, err
	}
	r.commitMu.Lock()
	prev, hasPrev := r.committed[it.N-1]
	mine := r.committed[it.N]
	r.commitMu.Unlock()
	if hasPrev {
		select {
		case <-prev:
		case <-ctx.Done():
			return artifacts.Commit{}, ctx.Err()
		}
	}
	if err := it.moveIn(ctx); err != nil {
		return artifacts.Commit{}, err
	}
	if err := r.stageConfig(ctx); err != nil {
		return artifacts.Commit{}, fmt.Errorf("stage %s: %w", runs.ConfigPath, err)
	}
	if state != nil {
		b, err := json.MarshalIndent(state, "", "  ")
		if err != nil {
			return artifacts.Commit{}, fmt.Errorf("encode state: %w", err)
		}
		if _, err := r.store.PutObject(ctx, r.branch, runs.StatePath, bytes.NewReader(append(b, '\n')), &artifacts.PutOptions{ContentType: "application/json"}); err != nil {
			return artifacts.Commit{}, fmt.Errorf("stage state: %w", err)
		}
	}
	keys := map[string]string{}
	it.mu.Lock()
	for _, n := range it.nodes {
		keys[n.name] = n.key
	}
	it.mu.Unlock()
	kb, err := json.Marshal(keys)
	if err != nil {
		return artifacts.Commit{}, fmt.Errorf("encode the cache keys of iteration %d: %w", it.N, err)
	}
	md := map[string]string{
		runs.MetaRun:        r.name,
		runs.MetaIteration:  strconv.Itoa(it.N),
		runs.MetaConfigHash: r.opts.ConfigHash,
		"rlpipe.cache-keys": string(kb),
	}
	for k, v := range meta {
		md[k] = v
	}
	if err := r.events.flush(ctx, r.store, r.branch, it.N); err != nil {
		return artifacts.Commit{}, fmt.Errorf("write events: %w", err)
	}
	msg := it.Message
	if msg == "" {
		msg = fmt.Sprintf("iteration %d", it.N)
	}
	c, err := r.store.Commit(ctx, r.branch, msg, &artifacts.CommitOptions{Metadata: md})
	if err != nil {
		return artifacts.Commit{}, fmt.Errorf("commit %s: %w", it.Group, err)
	}
	r.events.emit(Event{Kind: EventCommitted, Group: it.Group, Iteration: it.N, Commit: c.ID})
	r.events.forget(it.N)
	close(mine)
	// Only the next iteration waits on this one; the one before is done with.
	r.commitMu.Lock()
	delete(r.committed, it.N-1)
	r.commitMu.Unlock()
	return c, nil
}

// seedFor derives a task seed from the run seed, iteration and call name.
func (r *Run) seedFor(iteration int, name string) uint64 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], r.opts.Seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(iteration))
	d := digestBytes(append(b[:], name...))
	v, _ := strconv.ParseUint(d[:16], 16, 64)
	return v
}

// resolveInputs waits for node inputs and describes store inputs.
func (n *Node) resolveInputs(ctx context.Context) (map[string]Artifact, error) {
	out := make(map[string]Artifact, len(n.call.Inputs))
	for name, a := range n.call.Inputs {
		if a.node != nil {
			if err := a.node.Wait(ctx); err != nil {
				return nil, fmt.Errorf("%w: input %s comes from task %s, which failed", ErrUpstream, name, a.node.name)
			}
			res, err := a.node.Result(a.output)
			if err != nil {
				return nil, Permanent(err)
			}
			out[name] = res
			continue
		}
		d, err := describe(ctx, n.it.run.store, a)
		if err != nil {
			return nil, fmt.Errorf("input %s (%s:%s): %w", name, a.Ref, a.Path, err)
		}
		out[name] = d
	}
	return out, nil
}

// describe fills in an artifact's checksum (or its files' checksums).
func describe(ctx context.Context, st artifacts.Store, a Artifact) (Artifact, error) {
	if !a.Dir {
		info, err := st.StatObject(ctx, a.Ref, a.Path)
		if err != nil {
			return a, err
		}
		a.Checksum = info.Checksum
		return a, nil
	}
	a.Files = map[string]string{}
	prefix := a.Path + "/"
	for e, err := range st.ListObjects(ctx, a.Ref, &artifacts.ListOptions{Prefix: prefix}) {
		if err != nil {
			return a, err
		}
		a.Files[e.Path[len(prefix):]] = e.Checksum
	}
	if len(a.Files) == 0 {
		return a, fmt.Errorf("%w: directory %s:%s is empty or missing", artifacts.ErrObjectNotFound, a.Ref, a.Path)
	}
	return a, nil
}

// stagedReadTries bounds the reads of an object the engine staged itself
// that the store answers as not found; stagedReadWait is the first wait
// between them (doubled each time, at most 2 s: about 10 s in all).
var (
	stagedReadTries = 8
	stagedReadWait  = 100 * time.Millisecond
)

// downloadFile copies ref:path to dst; for an object of at most digestUpTo
// bytes it also returns the hex SHA-256 of the bytes it wrote. staged says the engine recorded
// the object when it was staged (a task's output, with its checksum): it
// exists, so "not found" can only be a read racing a commit of the branch
// (lakeFS drops a branch's staged entries as the commit that holds them
// lands, and a read in between misses both). Such a read is retried, a
// bounded number of times, until the commit's head serves the object; a
// name the engine did not stage (the dataset, a deleted branch's object)
// fails on the first miss.
func downloadFile(ctx context.Context, st artifacts.Store, ref, path, dst string, staged bool, digestUpTo int64, log zerolog.Logger) (sha string, err error) {
	wait := stagedReadWait
	var rc io.ReadCloser
	var info artifacts.ObjectInfo
	for try := 1; ; try++ {
		rc, info, err = st.GetObject(ctx, ref, path)
		if err == nil {
			break
		}
		if !staged || !errors.Is(err, artifacts.ErrNotFound) || try >= stagedReadTries {
			if staged && try > 1 {
				return "", fmt.Errorf("%w (still missing after %d reads: the object was staged by this run; was its branch deleted or reset?)", err, try)
			}
			return "", err
		}
		log.Warn().Str("ref", ref).Str("path", path).Int("read", try).Dur("wait", wait).
			Msg("a staged input is not found: a commit of its branch is in flight; reading again")
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
	defer rc.Close()
	if err := os.MkdirAll(parentDir(dst), 0o755); err != nil {
		return "", err
	}
	f, err := os.Create(dst)
	if err != nil {
		return "", err
	}
	var w io.Writer = f
	h := sha256.New()
	digest := digestUpTo > 0 && info.Size <= digestUpTo
	if digest {
		w = io.MultiWriter(f, h)
	}
	if _, err := io.Copy(w, rc); err != nil {
		f.Close()
		return "", fmt.Errorf("read %s:%s: %w", ref, path, err)
	}
	if digest {
		sha = hex.EncodeToString(h.Sum(nil))
	}
	return sha, f.Close()
}

func parentDir(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "."
}

package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/internal/scratch"
)

// exec runs a node: wait for inputs, consult the cache, then run attempts
// under the environment's resources, retries and timeouts.
func (n *Node) exec(ctx context.Context) {
	defer close(n.done)
	defer n.markStarted()
	n.err = n.execute(ctx)
	if n.err != nil && !errors.Is(n.err, ErrUpstream) {
		var te *TaskError
		if !errors.As(n.err, &te) {
			n.err = &TaskError{Task: n.name, Group: n.it.Group, Attempts: 0, Err: n.err}
		}
		switch {
		case n.failed.Load():
			// The executor reported the failure, and the iteration heard.
		case ctx.Err() != nil:
			// Ended after its context was cancelled: stopped, whatever its
			// error says.
			n.it.run.events.emit(Event{Kind: EventCancelled, Group: n.it.Group, Stage: n.stage, Iteration: n.it.N,
				Task: n.name, Env: n.task.Env, Attempt: n.attempts, Duration: n.elapsed, Key: n.key, Error: context.Cause(ctx).Error()})
		default:
			n.fail()
		}
	}
}

// fail tells the iteration, once, that n failed on its own.
func (n *Node) fail() {
	if n.failed.CompareAndSwap(false, true) && n.it.onFail != nil {
		n.it.onFail(n)
	}
}

func (n *Node) settings() (string, Settings) {
	r := n.it.run
	env := n.task.Env
	s := defaultSettings
	if es, ok := r.opts.Envs[env]; ok {
		s = s.Merge(es)
	}
	s = s.Merge(n.task.Settings).Merge(n.call.Override)
	if r.opts.NoCache {
		s.Cache.Mode = CacheDisable
	}
	return env, s
}

// seed is the task's seed: 0 for a Deterministic task.
func (n *Node) seed() uint64 {
	if n.task.Deterministic {
		return 0
	}
	return n.it.run.seedFor(n.it.N, n.name)
}

func (n *Node) execute(ctx context.Context) error {
	r := n.it.run
	if err := n.task.validate(); err != nil {
		return err
	}
	env, s := n.settings()
	if env != "" {
		if _, ok := r.opts.Envs[env]; !ok {
			return Permanent(fmt.Errorf("%w: task %s names environment %q, which is not defined", ErrConfig, n.name, env))
		}
	}
	if err := s.Validate(); err != nil {
		return fmt.Errorf("task %s: %w", n.name, err)
	}
	inputs, err := n.resolveInputs(ctx)
	if err != nil {
		return err
	}
	params, err := canonicalJSON(n.call.Params)
	if err != nil {
		return Permanent(fmt.Errorf("%w: task %s: params are not JSON-encodable: %v", ErrConfig, n.name, err))
	}
	if n.key, err = cacheKey(n.task, s, inputs, params, n.seed()); err != nil {
		return Permanent(fmt.Errorf("task %s: %w", n.name, err))
	}
	dir := n.call.Dir
	if dir == "" {
		dir = n.it.Dir
	}
	branch, err := n.it.outputBranch(ctx)
	if err != nil {
		return err
	}
	ev := Event{Group: n.it.Group, Stage: n.stage, Iteration: n.it.N, Task: n.name, Env: env, Key: n.key}
	if s.Cache.Mode == CacheAuto {
		if outs, ok, err := n.fromCache(ctx, branch, dir); err != nil {
			return err
		} else if ok {
			n.outputs, n.cached = outs, true
			e := ev
			e.Kind = EventCached
			r.events.emit(e)
			return nil
		}
	}
	if a := n.call.After; a != nil {
		select {
		case <-a.started:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// Cancelled while it waited (the loop stopped after a failure):
	// start no attempt.
	if err := ctx.Err(); err != nil {
		return err
	}
	job := Job{Run: r.name, Branch: branch, Task: n.task.Name, Version: n.task.Version, Call: n.name,
		Env: env, Group: n.it.Group, Iteration: n.it.N, Key: n.key, Seed: n.seed(), Dir: dir,
		Inputs: inputs, Params: params, Settings: s, ConfigHash: r.opts.ConfigHash}
	report := func(e Event) {
		if e.Kind == EventStarted {
			n.markStarted()
		}
		r.events.emit(e)
		// The iteration hears of a failure as the executor reports it,
		// before the executor frees the task's resources for another.
		if e.Kind == EventFailed && ctx.Err() == nil {
			n.fail()
		}
	}
	x := r.executor
	if n.task.Bookkeeping {
		if _, here := x.(localExecutor); !here {
			// Its environment may be sized for the workers' hosts: here
			// it takes no GPU and at most what this machine has.
			job.Settings.Resources = r.pool.machine.fit(job.Settings.Resources)
		}
		x = localExecutor{r}
	}
	out, err := x.Execute(ctx, n.task, job, report)
	n.attempts, n.elapsed = out.Attempts, out.Elapsed
	if err != nil {
		return err
	}
	n.outputs = out.Outputs
	return r.cache.record(ctx, &manifest{Key: n.key, Task: n.name, Outputs: n.it.listed(out.Outputs)})
}

// attempter runs single attempts of jobs against a store: the local
// executor's and a Worker's.
type attempter struct {
	store   artifacts.Store
	memo    *memoizer
	workDir string
	log     zerolog.Logger
	// objects, when the store is remote, keeps local copies of the
	// objects attempts put and read (objectCache); nil: every input is
	// read from the store.
	objects *objectCache
}

func (r *Run) attempter() attempter {
	return attempter{store: r.store, memo: r.memo, workDir: r.opts.WorkDir, log: r.opts.Logger, objects: r.objects}
}

// taskDirPrefix starts the names of attempts' work directories. Each is
// locked by its process (internal/scratch), so the directories of a
// killed engine or worker are told apart and swept at the next start.
const taskDirPrefix = "rlpipe-task-"

// sweepTaskDirs removes the work directories that killed processes left
// in dir ("" means the OS temp dir), keeping those of live ones.
func sweepTaskDirs(dir string, log zerolog.Logger) {
	removed, err := scratch.Sweep(dir, taskDirPrefix)
	if len(removed) > 0 {
		log.Info().Int("removed", len(removed)).Msg("removed the task work directories of killed runs")
	}
	if err != nil {
		log.Warn().Err(err).Msg("could not sweep old task work directories")
	}
}

// withLimit is ctx ended after d, or ctx itself when d is 0 (no limit):
// an attempt's timeout, a call's deadline over all its attempts.
func withLimit(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return ctx, func() {}
}

// attempt runs the task once in a fresh work directory and uploads its
// outputs to the job's branch.
func (a attempter) attempt(ctx context.Context, t *Task, job *Job, attempt int, slot *warmSlot) (map[string]Artifact, error) {
	s := job.Settings
	var err error
	actx, cancel := withLimit(ctx, s.Timeout)
	defer cancel()
	// A task that has files to read or write, or a command to run in it,
	// gets its directory now; a Go task with none only if it asks.
	wd := &workDir{parent: a.workDir}
	defer wd.remove()
	var work string
	if len(job.Inputs) > 0 || len(t.Outputs) > 0 || t.Run == nil {
		if work, err = wd.path(); err != nil {
			return nil, err
		}
	}
	tc := &TaskContext{
		Task: job.Call, Group: job.Group, Iteration: job.Iteration, Attempt: attempt,
		Seed: job.Seed, work: wd,
		memoCaller: t.Name,
		inputs:     map[string]string{}, outputs: outputPaths(work, t.Outputs),
		params: job.Params, memo: a.memo, warm: slot,
		log: a.log.With().Str("run", job.Run).Int("iteration", job.Iteration).Str("task", job.Call).Int("attempt", attempt).Logger(),
	}
	if err := a.fetch(actx, job.Inputs, work, tc); err != nil {
		return nil, err
	}
	for _, o := range t.Outputs {
		target := tc.outputs[o.Name]
		if o.Dir {
			err = os.MkdirAll(target, 0o755)
		} else {
			err = os.MkdirAll(filepath.Dir(target), 0o755)
		}
		if err != nil {
			return nil, err
		}
	}
	if t.Run != nil {
		err = runFunc(actx, t.Run, tc)
	} else {
		err = runCommand(actx, t.Command, tc, s)
	}
	if err != nil {
		if actx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			return nil, fmt.Errorf("%w after %s (attempt %d; its processes were killed)", ErrTimeout, s.Timeout, attempt)
		}
		return nil, err
	}
	return a.upload(actx, t, job, tc)
}

// parallelTransfers bounds the files an attempt reads from, or writes
// to, the store at once: over a remote store (lakeFS, `rlpipe store
// serve`) each file is a round trip, and a train call reads a handful.
const parallelTransfers = 8

// fetch downloads inputs into work/in, parallelTransfers files at a
// time, and records their paths in tc.
func (a attempter) fetch(ctx context.Context, inputs map[string]Artifact, work string, tc *TaskContext) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelTransfers)
	names := slices.Sorted(maps.Keys(inputs))
	for _, name := range names {
		in, p := inputs[name], filepath.Join(work, "in", name)
		tc.inputs[name] = p
		// sum is the object's checksum when the job records it (an
		// object staged or committed by the run): then it may come from
		// the object cache, and goes into it when the bytes read hash to
		// it (the store's checksum is their SHA-256 when it recorded one).
		get := func(path, dst, sum string) {
			g.Go(func() error {
				if a.objects.get(sum, dst) {
					return nil
				}
				digest, err := downloadFile(gctx, a.store, in.Ref, path, dst, sum != "", a.objects.wants(sum), tc.log)
				if err != nil {
					return fmt.Errorf("fetch input %s: %w", name, err)
				}
				if digest != "" && digest == sum {
					a.objects.add(sum, dst, nil)
				}
				return nil
			})
		}
		if !in.Dir {
			get(in.Path, p, in.Checksum)
			continue
		}
		for _, rel := range slices.Sorted(maps.Keys(in.Files)) {
			get(in.Path+"/"+rel, p+"/"+rel, in.Files[rel])
		}
	}
	return g.Wait()
}

// workDir is an attempt's scratch directory, made on first use and
// locked by this process (internal/scratch) until the attempt ends.
type workDir struct {
	parent string

	mu   sync.Mutex
	dir  *scratch.Dir
	err  error
	done bool
}

// path makes the directory on the first call and returns it.
func (w *workDir) path() (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.done:
		return "", fmt.Errorf("the attempt's work directory is gone: the attempt is over")
	case w.dir == nil && w.err == nil:
		w.dir, w.err = scratch.Mkdir(w.parent, taskDirPrefix)
	}
	if w.err != nil {
		return "", w.err
	}
	return w.dir.Path(), nil
}

// remove removes the directory if it was made; later calls of path fail.
func (w *workDir) remove() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	if w.dir != nil {
		w.dir.Remove()
	}
}

// runFunc runs a Go task body; if it outlives its context the engine stops
// waiting for it (Go code cannot be killed: task bodies should honour ctx).
func runFunc(ctx context.Context, f Func, tc *TaskContext) (err error) {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- Permanent(fmt.Errorf("task %s panicked: %v", tc.Task, p))
			}
		}()
		done <- f(ctx, tc)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// upload checks each declared output and writes it to the job's branch.
func (a attempter) upload(ctx context.Context, t *Task, job *Job, tc *TaskContext) (map[string]Artifact, error) {
	prov := artifacts.Provenance{Task: t.Name, TaskVersion: t.Version, ConfigHash: job.ConfigHash, CreatedAt: time.Now().UTC().Truncate(time.Second)}
	seed := int64(tc.Seed)
	prov.Seed = &seed
	if len(job.Inputs) > 0 {
		prov.Inputs = map[string]string{}
		for name, in := range job.Inputs {
			d, err := in.digest()
			if err != nil {
				return nil, Permanent(fmt.Errorf("task %s: input %s: %w", job.Call, name, err))
			}
			prov.Inputs[name] = d
		}
	}
	meta, err := prov.Metadata(nil)
	if err != nil {
		return nil, Permanent(fmt.Errorf("task %s: %w", job.Call, err))
	}
	outs := map[string]Artifact{}
	var pending []upload
	for _, o := range t.Outputs {
		local := tc.outputs[o.Name]
		dst := job.Dir + "/" + o.file()
		if !o.Dir {
			fi, err := os.Stat(local)
			if err != nil || fi.IsDir() {
				return nil, Permanent(fmt.Errorf("%w: task %s did not write output %q (expected a file at {{outputs.%s}} = %s)", ErrOutput, job.Call, o.Name, o.Name, local))
			}
			if o.Check != nil {
				if err := o.Check(local); err != nil {
					return nil, Permanent(fmt.Errorf("%w: task %s output %q (%s): %v", ErrOutput, job.Call, o.Name, dst, err))
				}
			}
			name := o.Name
			pending = append(pending, upload{dst: dst, local: local, before: fi, done: func(sum string) {
				outs[name] = Artifact{Ref: job.Branch, Path: dst, Checksum: sum}
			}})
			continue
		}
		var files []string
		err := filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, p)
			}
			return err
		})
		if err != nil || len(files) == 0 {
			return nil, Permanent(fmt.Errorf("%w: task %s wrote no files into output directory %q (%s)", ErrOutput, job.Call, o.Name, local))
		}
		sort.Strings(files)
		dirArt := Artifact{Ref: job.Branch, Path: dst, Dir: true, Files: map[string]string{}}
		for _, f := range files {
			rel := filepath.ToSlash(strings.TrimPrefix(f, local+string(filepath.Separator)))
			before, _ := os.Lstat(f)
			pending = append(pending, upload{dst: dst + "/" + rel, local: f, before: before, done: func(sum string) { dirArt.Files[rel] = sum }})
		}
		outs[o.Name] = dirArt
	}
	if err := putFiles(ctx, a.store, job.Branch, pending, meta); err != nil {
		return nil, err
	}
	for _, u := range pending {
		if u.before != nil {
			a.objects.add(u.sum, u.local, u.before)
		}
	}
	return outs, nil
}

// upload is a task's output file to put at dst; done takes its checksum,
// which putFiles also records in sum. before is the file as it was before
// the put, for the object cache.
type upload struct {
	dst, local string
	done       func(sum string)
	sum        string
	before     os.FileInfo
}

// putFiles puts every upload on branch: in one step where the store is an
// artifacts.MultiPutter (one sync for a task's outputs instead of one a
// file), else, or when that step fails, one file at a time, whose errors
// name the file.
func putFiles(ctx context.Context, st artifacts.Store, branch string, ups []upload, meta map[string]string) error {
	if mp, ok := st.(artifacts.MultiPutter); ok && len(ups) > 1 {
		if infos, err := putAll(ctx, mp, branch, ups, meta); err == nil {
			for i, u := range ups {
				ups[i].sum = infos[i].Checksum
				u.done(infos[i].Checksum)
			}
			return nil
		}
	}
	// Each put is a round trip to a remote store, and a train call has
	// a handful (adapter, optimizer state): parallelTransfers at a time,
	// in any order.
	sums := make([]string, len(ups))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelTransfers)
	for i, u := range ups {
		g.Go(func() error {
			info, err := putFile(gctx, st, branch, u.dst, u.local, meta)
			sums[i] = info.Checksum
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i, u := range ups {
		ups[i].sum = sums[i]
		u.done(sums[i])
	}
	return nil
}

// putAll opens every upload's file and puts them with one PutObjects.
func putAll(ctx context.Context, mp artifacts.MultiPutter, branch string, ups []upload, meta map[string]string) ([]artifacts.ObjectInfo, error) {
	puts := make([]artifacts.Put, len(ups))
	for i, u := range ups {
		f, err := os.Open(u.local)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		puts[i] = artifacts.Put{Path: u.dst, Body: f, Options: &artifacts.PutOptions{Metadata: meta}}
	}
	infos, err := mp.PutObjects(ctx, branch, puts)
	if err == nil && len(infos) != len(ups) {
		err = fmt.Errorf("put %d objects on %s: the store returned %d infos", len(ups), branch, len(infos))
	}
	return infos, err
}

func putFile(ctx context.Context, st artifacts.Store, branch, dst, local string, meta map[string]string) (artifacts.ObjectInfo, error) {
	f, err := os.Open(local)
	if err != nil {
		return artifacts.ObjectInfo{}, err
	}
	defer f.Close()
	info, err := st.PutObject(ctx, branch, dst, f, &artifacts.PutOptions{Metadata: meta})
	if err != nil {
		return info, fmt.Errorf("write output %s:%s: %w", branch, dst, err)
	}
	return info, nil
}

// fromCache links a cached result's outputs into place on branch. ok is
// false on a miss, including an entry whose sources are gone or changed.
func (n *Node) fromCache(ctx context.Context, branch, dir string) (map[string]Artifact, bool, error) {
	r := n.it.run
	m, err := r.cache.lookup(ctx, n.key)
	if err != nil || m == nil {
		return nil, false, err
	}
	outs := map[string]Artifact{}
	for _, o := range n.task.Outputs {
		src, ok := m.Outputs[o.Name]
		if !ok {
			return nil, false, nil
		}
		dst := dir + "/" + o.file()
		if !src.Dir {
			ok, err := link(ctx, r.store, src, src.Path, src.Checksum, branch, dst)
			if err != nil || !ok {
				return nil, false, err
			}
			outs[o.Name] = Artifact{Ref: branch, Path: dst, Checksum: src.Checksum}
			continue
		}
		for rel, sum := range src.Files {
			ok, err := link(ctx, r.store, src, src.Path+"/"+rel, sum, branch, dst+"/"+rel)
			if err != nil || !ok {
				return nil, false, err
			}
		}
		outs[o.Name] = Artifact{Ref: branch, Path: dst, Dir: true, Files: src.Files}
	}
	return outs, true, nil
}

package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
)

// A loop iteration's tasks stage their outputs on the iteration's own
// work branch, not on the run branch: with overlap, iteration N+1's tasks
// write while iteration N is about to commit, and a commit takes every
// change staged on its branch. At its commit, iteration N's outputs —
// the exact paths its tasks reported — are linked into the run branch
// (artifacts.MultiCopier in one step, else artifacts.Copier, or read and
// written again, one object at a time) and committed with its
// state, metrics and events, so the commit of iteration N holds
// iterations ≤ N and nothing of N+1, whatever the timing. The work
// branch is deleted once no iteration that may read its outputs is in
// flight; one left by a killed process is reused when the run resumes
// the iteration (its staged outputs are the cache's hits), and deleted
// at the next Loop when its iteration is committed.

// WorkBranchPrefix starts the name of every work branch: "rlpipe-work-"
// then the run branch, then the iteration (WorkBranch).
const WorkBranchPrefix = "rlpipe-work-"

// WorkBranch is the branch iteration n of the run on branch stages its
// outputs on until it commits: "rlpipe-work-runs-arith-000011".
func WorkBranch(branch string, n int) string {
	return fmt.Sprintf("%s%s-%06d", WorkBranchPrefix, branch, n)
}

// workIteration is the iteration a work branch of the run on branch
// stages; ok is false for any other branch.
func workIteration(branch, name string) (n int, ok bool) {
	num, ok := strings.CutPrefix(name, WorkBranchPrefix+branch+"-")
	if !ok || len(num) != 6 {
		return 0, false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = 10*n + int(c-'0')
	}
	return n, true
}

// outputBranch is the branch the iteration's tasks stage their outputs
// on: its work branch, made on the first call (kept if a killed process
// made it), or the run branch for an iteration that has none.
func (it *Iteration) outputBranch(ctx context.Context) (string, error) {
	r := it.run
	if it.work == "" {
		return r.branch, nil
	}
	it.workMu.Lock()
	defer it.workMu.Unlock()
	if !it.workMade {
		if err := ensureBranch(ctx, r.store, it.work, r.branch); err != nil {
			return "", fmt.Errorf("make the work branch of %s: %w", it.Group, err)
		}
		it.workMade = true
		r.commitMu.Lock()
		r.works[it.N] = it.work
		r.commitMu.Unlock()
	}
	return it.work, nil
}

// moveIn links every output the iteration's tasks staged on its work
// branch into the run branch, in path order; the iteration has finished.
func (it *Iteration) moveIn(ctx context.Context) error {
	if it.work == "" {
		return nil
	}
	type file struct{ path, sum string }
	var files []file
	it.mu.Lock()
	for _, n := range it.nodes {
		for _, a := range n.outputs {
			if a.Ref != it.work {
				continue
			}
			if !a.Dir {
				files = append(files, file{a.Path, a.Checksum})
			}
			for rel, sum := range a.Files {
				files = append(files, file{a.Path + "/" + rel, sum})
			}
		}
	}
	it.mu.Unlock()
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	src := Artifact{Ref: it.work}
	if mc, ok := it.run.store.(artifacts.MultiCopier); ok {
		// The outputs not yet in place (all of them, unless a resumed
		// run's commit failed half way), linked in one step: one sync
		// for the iteration instead of one an object. Any failure falls
		// back to linking one at a time, whose errors name the object.
		var todo []string
		want := map[string]string{}
		for _, f := range files {
			if cur, err := it.run.store.StatObject(ctx, it.run.branch, f.path); err == nil && cur.Checksum == f.sum {
				continue
			}
			todo, want[f.path] = append(todo, f.path), f.sum
		}
		if len(todo) == 0 {
			return nil
		}
		if infos, err := mc.CopyObjects(ctx, it.work, it.run.branch, todo); err == nil && sameSums(infos, want) {
			return nil
		}
	}
	for _, f := range files {
		ok, err := link(ctx, it.run.store, src, f.path, f.sum, it.run.branch, f.path)
		if err == nil && !ok {
			err = fmt.Errorf("%w: it is not on %s with checksum %s; run the loop again to produce it again", artifacts.ErrObjectNotFound, it.work, f.sum)
		}
		if err != nil {
			return fmt.Errorf("move %s of %s into %s: %w", f.path, it.Group, it.run.branch, err)
		}
	}
	return nil
}

// sameSums reports whether every copied object has the checksum want
// holds for its path.
func sameSums(infos []artifacts.ObjectInfo, want map[string]string) bool {
	for _, in := range infos {
		if in.Checksum != want[in.Path] {
			return false
		}
	}
	return len(infos) == len(want)
}

// retireWork deletes the work branches of iterations ≤ upTo that this run
// made or found: no iteration in flight reads their outputs any more.
// A branch that cannot be deleted is logged and left for the next Loop.
func (r *Run) retireWork(ctx context.Context, upTo int) {
	r.commitMu.Lock()
	var names []string
	for n, name := range r.works {
		if n <= upTo {
			names = append(names, name)
			delete(r.works, n)
		}
	}
	r.commitMu.Unlock()
	sort.Strings(names)
	for _, name := range names {
		if err := r.store.DeleteBranch(ctx, name); err != nil && !errors.Is(err, artifacts.ErrNotFound) {
			r.opts.Logger.Warn().Err(err).Str("branch", name).Msg("could not delete a committed iteration's work branch; the next run of the loop deletes it")
		}
	}
}

// findWork records the work branches of the run that killed processes
// left, so that those of committed iterations are retired.
func (r *Run) findWork(ctx context.Context) error {
	for b, err := range r.store.ListBranches(ctx) {
		if err != nil {
			return fmt.Errorf("list the work branches of run %s: %w", r.name, err)
		}
		if n, ok := workIteration(r.branch, b.Name); ok {
			r.commitMu.Lock()
			r.works[n] = b.Name
			r.commitMu.Unlock()
		}
	}
	return nil
}

// listed is the manifest of a task's outputs as the cache records them:
// at their place on the run branch, where the iteration's commit puts
// them, not on the work branch, which is deleted after it.
func (it *Iteration) listed(outs map[string]Artifact) map[string]Artifact {
	if it.work == "" {
		return outs
	}
	m := make(map[string]Artifact, len(outs))
	for k, a := range outs {
		if a.Ref == it.work {
			a.Ref = it.run.branch
		}
		m[k] = a
	}
	return m
}

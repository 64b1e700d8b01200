package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rlpipe/rlpipe/sandbox"
)

// Statuses of a Verdict besides the verifier's sandbox status.
const (
	// StatusTampered: the episode (or the Run phase) changed a protected
	// path; the reward is 0 and the verifier did not run.
	StatusTampered = "tampered"
	// StatusBadVerdict: the verifier wrote something other than pass,
	// fail or a number to its verdict channel; the reward is 0.
	StatusBadVerdict = "bad_verdict"
	// StatusUnsafePath: the final workspace holds a path the verifier
	// must not open: a symlink that leads out of the workspace, a FIFO, a
	// socket or a device the episode made. The reward is 0 and the
	// verifier did not run.
	StatusUnsafePath = "unsafe_path"
)

// Where the verifier finds what it judges with, in its sandbox.
const (
	// CheckDir holds Task.Checks, read-only.
	CheckDir = "/check"
	// CandidateDir holds the outcome of Task.Run, read-only: stdout and
	// stderr as printed, exit_code (decimal) and status (a
	// sandbox.Status), each of the last two followed by a newline.
	CandidateDir = "/candidate"
)

// validateTask checks what NewEnv can check of a task before any episode.
func validateTask(world *World, task Task) error {
	if strings.TrimSpace(task.Verifier) == "" {
		return fmt.Errorf("agent env for world %q: the task has no verifier: %w", world.Name, ErrInvalid)
	}
	for _, name := range slices.Sorted(maps.Keys(task.Checks)) {
		if name == "." || !filepath.IsLocal(name) || path.Clean(name) != name || strings.IndexByte(name, 0) >= 0 {
			return fmt.Errorf("agent env for world %q: check file %q: want a clean relative path, e.g. expected.txt (it is %s/NAME to the verifier): %w",
				world.Name, name, CheckDir, ErrInvalid)
		}
	}
	for _, p := range task.Protected {
		if err := checkProtected(world.Dir, p); err != nil {
			return fmt.Errorf("agent env for world %q: protected path %q: %v: %w", world.Name, p, err, ErrInvalid)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(task.Files)) {
		if err := checkTaskFile(world.Dir, name, task.Protected); err != nil {
			return fmt.Errorf("agent env for world %q: task file %q: %v: %w", world.Name, name, err, ErrInvalid)
		}
	}
	return nil
}

// checkTaskFile checks a Task.Files name: clean, relative, its parents
// real directories of the world, not a directory there, and neither
// protected nor under a protected path.
func checkTaskFile(worldDir, name string, protected []string) error {
	if name == "." || !filepath.IsLocal(name) || path.Clean(name) != name || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("want a clean relative path, e.g. input.txt or data/input.txt")
	}
	if bad := badParent(worldDir, name); bad != "" {
		return fmt.Errorf("%s is not a directory of the world: a task file goes in a directory the world has", bad)
	}
	if fi, err := os.Lstat(filepath.Join(worldDir, filepath.FromSlash(name))); err == nil && !fi.Mode().IsRegular() {
		kind := "a directory"
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			kind = "a symlink"
		case !fi.IsDir():
			kind = "a special file"
		}
		return fmt.Errorf("the world has it as %s, not a regular file", kind)
	}
	for _, p := range protected {
		if name == p || strings.HasPrefix(name, p+"/") || p == "." {
			return fmt.Errorf("it is protected (%s): protected paths are compared with the world, which does not have the task's files", p)
		}
	}
	return nil
}

// checkProtected checks a Task.Protected path against the world: clean,
// relative, reached through directories of the world (no symlink on the
// way out of it), and there.
func checkProtected(worldDir, p string) error {
	if !filepath.IsLocal(p) || path.Clean(p) != p || strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("want a clean relative path inside the world, e.g. tests or tests/run.sh")
	}
	if bad := badParent(worldDir, p); bad != "" {
		return fmt.Errorf("%s is not a directory of the world (a symlink or a file): protect the path it leads to", bad)
	}
	if _, err := os.Lstat(filepath.Join(worldDir, filepath.FromSlash(p))); err != nil {
		if os.IsNotExist(err) {
			return fmt.Errorf("it does not exist in the world")
		}
		return err
	}
	return nil
}

// badParent returns the first proper parent of p, below root, that is not
// a real directory (a symlink, a file, missing), or "".
func badParent(root, p string) string {
	if p == "." {
		return ""
	}
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		d := strings.Join(parts[:i], "/")
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(d)))
		if err != nil || !fi.IsDir() {
			return d
		}
	}
	return ""
}

// treeState maps each entry at or under the protected paths (slash
// separated, relative to the world's root) to a digest of what it is: its
// type, permissions and content, as TreeDigest hashes it.
type treeState map[string]string

// unreadable marks an entry of a workspace that could not be read: never
// a world's digest, so it always counts as changed.
const unreadable = "unreadable"

// stateOf returns the state of root at the protected paths. For the world
// (strict), every error is returned. For a workspace, what the agent may
// have done counts as a change, never an error: an entry it cannot read is
// unreadable, a path whose parent it replaced by a symlink or a file has no
// entries.
func stateOf(root string, protected []string, strict bool) (treeState, error) {
	st := treeState{}
	for _, p := range protected {
		if bad := badParent(root, p); bad != "" {
			if strict {
				return nil, fmt.Errorf("protected path %s: %s is not a directory", p, bad)
			}
			continue
		}
		top := filepath.Join(root, filepath.FromSlash(p))
		err := filepath.WalkDir(top, func(hp string, d fs.DirEntry, err error) error {
			rel, _ := filepath.Rel(top, hp)
			key := path.Join(p, filepath.ToSlash(rel))
			if err != nil {
				if strict {
					return err
				}
				if d == nil && os.IsNotExist(err) {
					return nil // removed
				}
				st[key] = unreadable
				return nil
			}
			h := sha256.New()
			if err := hashEntry(h, hp, key, d); err != nil {
				if strict {
					return err
				}
				st[key] = unreadable
				return nil
			}
			st[key] = hex.EncodeToString(h.Sum(nil))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("protected path %s: %w", p, err)
		}
	}
	return st, nil
}

// change is one difference of a workspace from its world at a protected
// path.
type change struct{ path, kind string }

// diffStates lists what changed from world to ws, in path order. Below a
// path that was removed or added only that path is listed, not each entry
// under it.
func diffStates(world, ws treeState) []change {
	kinds := map[string]string{}
	for p, d := range world {
		switch wd, ok := ws[p]; {
		case !ok:
			kinds[p] = "removed"
		case wd != d:
			kinds[p] = "changed"
		}
	}
	for p := range ws {
		if _, ok := world[p]; !ok {
			kinds[p] = "added"
		}
	}
	var out []change
	for _, p := range slices.Sorted(maps.Keys(kinds)) {
		covered := false
		for q, d := p, path.Dir(p); d != q && !covered; q, d = d, path.Dir(d) {
			k := kinds[d]
			covered = k == "removed" || k == "added"
		}
		if !covered {
			out = append(out, change{path: p, kind: kinds[p]})
		}
	}
	return out
}

// tampered compares the workspace with the world at the protected paths.
func (e *Env) tampered() ([]change, error) {
	if len(e.task.Protected) == 0 {
		return nil, nil
	}
	if e.protected == nil {
		st, err := stateOf(e.world.Dir, e.task.Protected, true)
		if err != nil {
			return nil, fmt.Errorf("world %q: %w", e.world.Name, err)
		}
		e.protected = st
	}
	st, err := stateOf(e.ws.root, e.task.Protected, false)
	if err != nil {
		return nil, err
	}
	return diffStates(e.protected, st), nil
}

// judge runs the three steps of Task's judgement on the final workspace.
// An error means no verdict.
func (e *Env) judge(ctx context.Context) (Verdict, error) {
	var v Verdict
	tamper := func(changes []change, when string) Verdict {
		var listed []string
		for _, c := range changes {
			v.Tampered = append(v.Tampered, c.path)
			listed = append(listed, c.path+" ("+c.kind+")")
		}
		v.Reward, v.Status = 0, StatusTampered
		v.Reason = when + " changed protected paths: " + strings.Join(listed, ", ")
		return v
	}
	changes, err := e.tampered()
	if err != nil {
		return Verdict{}, fmt.Errorf("compare protected paths: %v: %w", err, ErrInfra)
	}
	if len(changes) > 0 {
		return tamper(changes, "the episode"), nil
	}
	given := map[string][]byte{}
	for name, b := range e.task.Checks {
		given[CheckDir+"/"+name] = b
	}
	if strings.TrimSpace(e.task.Run) != "" {
		r, err := e.ws.Run(ctx, e.task.Run, e.o.Limits)
		if err != nil {
			if ctx.Err() != nil {
				return Verdict{}, fmt.Errorf("run phase: %w", err)
			}
			return Verdict{}, fmt.Errorf("run phase: %v: %w", err, ErrInfra)
		}
		v.Run = &r
		changes, err := e.tampered()
		if err != nil {
			return Verdict{}, fmt.Errorf("compare protected paths: %v: %w", err, ErrInfra)
		}
		if len(changes) > 0 {
			return tamper(changes, "the run phase"), nil
		}
		given[CandidateDir+"/stdout"] = []byte(r.Stdout)
		given[CandidateDir+"/stderr"] = []byte(r.Stderr)
		given[CandidateDir+"/exit_code"] = []byte(strconv.Itoa(r.ExitCode) + "\n")
		given[CandidateDir+"/status"] = []byte(string(r.Status) + "\n")
	}
	unsafe, err := unsafePaths(e.ws.root, e.world.Dir)
	if err != nil {
		return Verdict{}, fmt.Errorf("%v: %w", err, ErrInfra)
	}
	if len(unsafe) > 0 {
		v.Reward, v.Status, v.Reason = 0, StatusUnsafePath, unsafeReason(unsafe)
		return v, nil
	}
	r, err := e.ws.run(ctx, sandbox.Spec{
		Command:       []string{"bash", "-c", e.task.Verifier},
		ReadOnlyFiles: given,
		Verdict:       true,
		// Not /work: dotfiles the agent left there (.gitconfig, a Python
		// user site, .bashrc) would configure the verifier's tools.
		Env:    map[string]string{"HOME": "/tmp"},
		Limits: e.o.Limits,
	})
	if err != nil {
		if ctx.Err() != nil {
			return Verdict{}, fmt.Errorf("verifier: %w", err)
		}
		return Verdict{}, fmt.Errorf("verifier: %v: %w", err, ErrInfra)
	}
	v.Result = r
	v.Reward, v.Status, v.Reason = scoreVerifier(r)
	return v, nil
}

// scoreVerifier reads the verifier's reward: its verdict when it wrote
// one, else its exit status. A verifier stopped by a limit scores 0
// whatever it wrote. Its stdout is never read.
func scoreVerifier(r sandbox.Result) (reward float64, status, reason string) {
	status = string(r.Status)
	if r.Status != sandbox.StatusOK && r.Status != sandbox.StatusFailed {
		return 0, status, "the verifier was stopped (" + status + ") before it finished"
	}
	if r.Verdict == "" {
		if r.Passed() {
			return 1, status, ""
		}
		return 0, status, fmt.Sprintf("the verifier wrote no verdict and exited %d", r.ExitCode)
	}
	reward, reason, ok := ParseVerdict(r.Verdict)
	if !ok {
		shown := r.Verdict
		if len(shown) > 200 {
			shown = shown[:200] + "…"
		}
		return 0, StatusBadVerdict, fmt.Sprintf("the verifier wrote %q to $%s; want pass, fail (each optionally followed by \": reason\"), a number or \"reward: X\"",
			shown, sandbox.EnvVerdict)
	}
	return reward, status, reason
}

// ParseVerdict reads what a verifier wrote to $RLPIPE_VERDICT: one line,
// white space around it ignored, that is
//
//   - pass (reward 1) or fail (reward 0), in any case, optionally followed
//     by ":" or white space and a reason;
//   - a finite number, the reward: 0.25;
//   - "reward: X" or "reward=X", X a finite number.
//
// ok is false for anything else, several lines included.
func ParseVerdict(s string) (reward float64, reason string, ok bool) {
	line := strings.TrimSpace(s)
	if line == "" || strings.ContainsAny(line, "\r\n") {
		return 0, "", false
	}
	word, rest := line, ""
	if i := strings.IndexAny(line, ":= \t"); i >= 0 {
		word, rest = line[:i], strings.TrimSpace(line[i:])
	}
	number := func(s string) (float64, bool) {
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, false
		}
		return x, true
	}
	switch strings.ToLower(word) {
	case "pass", "fail":
		reason = strings.TrimSpace(strings.TrimPrefix(rest, ":"))
		if strings.ToLower(word) == "pass" {
			return 1, reason, true
		}
		return 0, reason, true
	case "reward":
		if rest == "" || (rest[0] != ':' && rest[0] != '=') {
			return 0, "", false
		}
		x, ok := number(rest[1:])
		return x, "", ok
	}
	x, ok := number(line)
	return x, "", ok
}

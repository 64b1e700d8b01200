package pyinterp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/sandbox"
)

// Interpreter is a Python interpreter found on the host and what a
// sandbox must see of it: the command to run inside, the host paths to
// bind at their own paths (the base installation: its stdlib and
// extension modules), and a venv mounted at VenvMount.
type Interpreter struct {
	// Host is the path it was found by (a venv's bin/python3, or the
	// interpreter itself).
	Host string
	// Command is the interpreter's path inside the sandbox.
	Command string
	// Version is sys.version's first word, e.g. "3.11.2".
	Version string
	// Binds are host paths bound read-only at their own paths.
	Binds []string
	// Mounts are host paths bound read-only elsewhere: sandbox path →
	// host path (a venv, at VenvMount).
	Mounts map[string]string
}

// VenvMount is where a venv is seen inside the sandbox: wherever it is
// on the host (often under /work or /tmp, which the sandbox's own
// directories hide), Python finds its prefix from the path it is run by.
const VenvMount = "/python/venv"

// Errors of Find, tested with errors.Is.
var (
	// ErrInterpreter: the python path does not name a usable interpreter.
	ErrInterpreter = errors.New("python interpreter not usable")
	// ErrUnreachable wraps ErrInterpreter: the interpreter's files are not
	// readable by the sandbox's user.
	ErrUnreachable = fmt.Errorf("not readable by the sandbox's user: %w", ErrInterpreter)
)

// probe is what the interpreter says of itself.
const probe = `import json, sys
print(json.dumps({"prefix": sys.prefix, "base_prefix": sys.base_prefix,
  "exec_prefix": sys.exec_prefix, "base_exec_prefix": sys.base_exec_prefix,
  "executable": sys.executable, "path": sys.path, "version": sys.version.split()[0]}))`

// EnvPython names the variable that gives the interpreter of a function
// without python: — a venv directory or an interpreter, relative to the
// working directory — in place of python3 on PATH. docs/REWARDS.md says
// why it is a variable and not a key.
const EnvPython = "RLPIPE_PYTHON"

// Find finds the interpreter that path names — a venv directory, an
// interpreter, or "" for $RLPIPE_PYTHON (EnvPython) when it is set, else
// python3 on PATH — by asking it once, outside
// the sandbox, for its prefixes and sys.path (run with -I, as the worker
// is: no PYTHONPATH, no user site). It fails with ErrInterpreter when
// path is missing or is not a Python 3, and with ErrUnreachable when the
// sandbox's user (nobody, when rlpipe runs as root) cannot read what the
// interpreter needs.
func Find(ctx context.Context, path string) (Interpreter, error) {
	host, err := hostInterpreter(path)
	if err != nil {
		return Interpreter{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, host, "-I", "-c", probe)
	cmd.Env = []string{"PATH=" + sandbox.DefaultPath, "LANG=C.UTF-8"}
	out, err := cmd.Output()
	if err != nil {
		msg := err.Error()
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			msg = lastLine(string(ee.Stderr))
		}
		return Interpreter{}, fmt.Errorf("python %s: ask it for its prefix: %s: %w", host, msg, ErrInterpreter)
	}
	var info probeInfo
	if err := json.Unmarshal(out, &info); err != nil {
		return Interpreter{}, fmt.Errorf("python %s: read what it says of itself (%q): %v: %w", host, out, err, ErrInterpreter)
	}
	return layout(host, info)
}

// probeInfo is probe's answer.
type probeInfo struct {
	Prefix         string   `json:"prefix"`
	BasePrefix     string   `json:"base_prefix"`
	ExecPrefix     string   `json:"exec_prefix"`
	BaseExecPrefix string   `json:"base_exec_prefix"`
	Executable     string   `json:"executable"`
	Path           []string `json:"path"`
	Version        string   `json:"version"`
}

// Host is the interpreter path names by Find's rule ("" for
// $RLPIPE_PYTHON, else python3 on PATH; a venv directory for its
// bin/python3), without asking it anything: for a program that runs it
// outside the sandbox, where Find's layout does not matter.
func Host(path string) (string, error) { return hostInterpreter(path) }

// hostInterpreter turns the python key's value into an interpreter path.
func hostInterpreter(path string) (string, error) {
	if path == "" && os.Getenv(EnvPython) != "" {
		env := os.Getenv(EnvPython)
		p, err := hostInterpreter(env)
		if err != nil {
			return "", fmt.Errorf("%s=%s (the interpreter where python: is not set): %w", EnvPython, env, err)
		}
		return p, nil
	}
	if path == "" {
		p, err := exec.LookPath("python3")
		if err != nil {
			return "", fmt.Errorf("look up python3 on PATH: no python3 found; set python: to a venv or an interpreter: %w", ErrInterpreter)
		}
		return p, nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("python %s: %v: %w", path, err, ErrInterpreter)
	}
	host, err := InterpreterIn(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("python %s: no such venv or interpreter; set python: to a venv directory or an interpreter's path: %w", path, ErrInterpreter)
	}
	if err != nil {
		return "", fmt.Errorf("python %s: %v: %w", path, err, ErrInterpreter)
	}
	return host, nil
}

// InterpreterIn is the interpreter path names without asking it
// anything: path itself when it is not a directory, else the venv's
// bin/python3 (or bin/python). The error is os.Stat's when path is
// missing (fs.ErrNotExist); a directory with neither is "a directory
// without bin/python3, so not a venv".
func InterpreterIn(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return path, nil
	}
	for _, name := range []string{"bin/python3", "bin/python"} {
		if _, err := os.Stat(filepath.Join(path, name)); err == nil {
			return filepath.Join(path, name), nil
		}
	}
	return "", errors.New("a directory without bin/python3, so not a venv")
}

// ownDirs are the sandbox's own directories: a host path below one is
// hidden inside, so only a venv, mounted at VenvMount, may be there.
var ownDirs = []string{"/work", "/tmp", "/proc", "/dev"}

// layout works out the sandbox's view of an interpreter from what it
// said of itself.
func layout(host string, info probeInfo) (Interpreter, error) {
	in := Interpreter{Host: host, Version: info.Version, Command: info.Executable}
	var venv string
	if info.Prefix != info.BasePrefix {
		venv = info.Prefix
		rel, err := filepath.Rel(venv, host)
		if err != nil || !filepath.IsLocal(rel) {
			// Run by a path outside the venv (a shim): run the venv's own.
			rel = "bin/python3"
		}
		in.Command = filepath.Join(VenvMount, rel)
		in.Mounts = map[string]string{VenvMount: venv}
	}
	roots := []string{info.BasePrefix, info.BaseExecPrefix}
	if real, err := filepath.EvalSymlinks(host); err == nil {
		roots = append(roots, filepath.Dir(real))
	}
	if venv == "" {
		roots = append(roots, info.Prefix, info.ExecPrefix)
	}
	for _, p := range info.Path {
		if _, err := os.Stat(p); err == nil && p != "" {
			roots = append(roots, p)
		}
	}
	var binds []string
	for _, r := range roots {
		r = filepath.Clean(r)
		if r == "/" || under(r, sandbox.DefaultBinds) || (venv != "" && under(r, []string{venv})) {
			continue
		}
		if own := below(r, ownDirs); own != "" {
			return Interpreter{}, fmt.Errorf("python %s: it needs %s, under the sandbox's own %s, where the sandbox cannot show it; use a venv (only a venv is mounted elsewhere) made from an interpreter outside %s: %w",
				host, r, own, own, ErrInterpreter)
		}
		binds = append(binds, r)
	}
	slices.Sort(binds)
	binds = slices.Compact(binds)
	// Keep only the outermost of nested paths.
	var outer []string
	for _, b := range binds {
		if !under(b, outer) {
			outer = append(outer, b)
		}
	}
	in.Binds = outer
	uid, gid := sandbox.SandboxUID()
	if uid != os.Geteuid() {
		for _, p := range append(slices.Clone(outer), venv) {
			if p == "" {
				continue
			}
			if blocker := Unreachable(p, uid, gid); blocker != "" {
				return Interpreter{}, fmt.Errorf("python %s: it needs %s, which the sandbox's user (uid %d) cannot read: %s; make it readable (chmod o+rx) or use an interpreter under /usr or a venv made from one: %w",
					host, p, uid, blocker, ErrUnreachable)
			}
		}
	}
	return in, nil
}

// under reports whether p is one of dirs or below one.
func under(p string, dirs []string) bool { return below(p, dirs) != "" }

// below returns the one of dirs that p is or is below, or "".
func below(p string, dirs []string) string {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return d
		}
	}
	return ""
}

// Unreachable returns why user uid (group gid), not this process's,
// cannot read the directory or file p: the first directory on the way
// it may not search ("/root is mode 0700"), or p itself unreadable; ""
// when it can.
func Unreachable(p string, uid, gid int) string {
	may := func(fi os.FileInfo, bit os.FileMode) bool {
		st, ok := statOwner(fi)
		m := fi.Mode().Perm()
		switch {
		case ok && st.uid == uid:
			return m&(bit<<6) != 0
		case ok && st.gid == gid:
			return m&(bit<<3) != 0
		default:
			return m&bit != 0
		}
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	dir := "/"
	for i, part := range parts {
		fi, err := os.Stat(dir)
		if err != nil {
			return fmt.Sprintf("%s: %v", dir, err)
		}
		if !may(fi, 0o1) {
			return fmt.Sprintf("%s is mode %04o", dir, fi.Mode().Perm())
		}
		dir = filepath.Join(dir, part)
		if i == len(parts)-1 {
			fi, err := os.Stat(dir)
			if err != nil {
				return fmt.Sprintf("%s: %v", dir, err)
			}
			if !may(fi, 0o4) || fi.IsDir() && !may(fi, 0o1) {
				return fmt.Sprintf("%s is mode %04o", dir, fi.Mode().Perm())
			}
		}
	}
	return ""
}

// lastLine is the last non-empty line of s: a traceback's exception.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

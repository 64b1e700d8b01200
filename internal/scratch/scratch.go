package scratch

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Dir is a temporary directory locked by this process until Remove.
type Dir struct {
	path string
	lock *os.File // the directory itself, open and flocked

	once sync.Once
	err  error
}

// Mkdir makes a new directory in parent ("" means os.TempDir()) whose name
// starts with prefix, mode 0700, locked by this process until Remove or
// until the process exits.
func Mkdir(parent, prefix string) (*Dir, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	for attempt := 1; ; attempt++ {
		d, err := mkdirOnce(parent, prefix)
		if !errors.Is(err, errSwept) || attempt == 3 {
			return d, err
		}
	}
}

// testBeforeLock, when a test sets it, is called with the hidden
// directory Mkdir has made and not yet locked: where a stalled owner
// stands when a Sweep takes its directory.
var testBeforeLock func(staged string)

// errSwept says a Sweep took the hidden directory Mkdir was making before
// Mkdir could lock it: Mkdir tries again under a new name.
var errSwept = errors.New("removed by a sweep before it was locked")

func mkdirOnce(parent, prefix string) (*Dir, error) {
	// The directory is made and locked under a hidden name (a leading
	// dot) that Sweep leaves alone for hiddenGrace, then renamed into
	// place: a Sweep running meanwhile would otherwise find it unlocked
	// and remove it as a dead owner's.
	name := prefix + "p" + strconv.Itoa(os.Getpid()) + "-"
	staged, err := os.MkdirTemp(parent, "."+name)
	if err != nil {
		return nil, err
	}
	p := filepath.Join(parent, strings.TrimPrefix(filepath.Base(staged), "."))
	if testBeforeLock != nil {
		testBeforeLock(staged)
	}
	f, err := os.Open(staged)
	if err == nil {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			// The lock is on the directory, not its name: it moves along.
			err = unix.Renameat2(unix.AT_FDCWD, staged, unix.AT_FDCWD, p, unix.RENAME_NOREPLACE)
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
				err = renameNoReplace(staged, p) // a file system without RENAME_NOREPLACE
			}
		}
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		os.Remove(staged)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.EWOULDBLOCK) {
			// Only a Sweep that took this directory for a dead owner's,
			// this process having stalled for hiddenGrace before locking
			// it, removes it or holds its lock.
			err = fmt.Errorf("%w: %w", errSwept, err)
		}
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	return &Dir{path: p, lock: f}, nil
}

// renameNoReplace renames a directory to a name nobody has: os.Rename
// would replace an empty directory of that name. The check and the rename
// are not atomic, which is fine for names that carry the pid and a random
// suffix.
func renameNoReplace(from, to string) error {
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("rename %s: %w", to, fs.ErrExist)
	}
	return os.Rename(from, to)
}

// Path returns the directory's path.
func (d *Dir) Path() string { return d.path }

// Remove removes the directory and everything in it, then drops the lock.
// It is idempotent; mounts below the directory must be gone first.
func (d *Dir) Remove() error {
	d.once.Do(func() {
		d.err = ForceRemoveAll(d.path)
		d.lock.Close()
	})
	return d.err
}

// Sweep removes the directories in parent ("" means os.TempDir()) that
// Mkdir made with prefix and whose owner is dead: nobody holds their
// lock. Other directories, even with the same prefix, are left alone. A
// directory whose lock is held belongs to a live process and is kept.
//
// That includes the hidden directories of owners killed inside Mkdir,
// before they renamed them into place: those are empty, and removed once
// older than hiddenGrace and unlocked (a younger one may be an owner's
// between making and locking it).
//
// It returns the paths removed and the errors met, joined; a directory
// that cannot be removed is left for the next Sweep.
func Sweep(parent, prefix string) ([]string, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("sweep %s: %w", parent, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		hiddenName, hidden := strings.CutPrefix(e.Name(), ".")
		if !e.IsDir() || !madeByMkdir(hiddenName, prefix) {
			continue
		}
		p := filepath.Join(parent, e.Name())
		if hidden {
			if ok, err := sweepHidden(p); ok {
				removed = append(removed, p)
			} else if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		dead, err := ownerDead(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !dead {
			continue
		}
		if err := unmountBelow(p); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := ForceRemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("sweep %s: %w", p, err))
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// hiddenGrace is how old a hidden directory of Mkdir's must be for Sweep
// to take it for a dead owner's: Mkdir locks it microseconds after making
// it, so only an owner stopped for this long in between is mistaken (and
// then makes another).
const hiddenGrace = time.Minute

// sweepHidden removes p, a hidden directory Mkdir made, when it is older
// than hiddenGrace, unlocked and empty, as those of owners killed before
// renaming them are. It reports whether it removed p.
func sweepHidden(p string) (bool, error) {
	fi, err := os.Lstat(p)
	if err != nil || time.Since(fi.ModTime()) < hiddenGrace {
		return false, nil // gone meanwhile, or maybe an owner's about to lock it
	}
	if dead, err := ownerDead(p); !dead {
		return false, err
	}
	// Never emptied: Mkdir renames its directory before anything is
	// written in it, so one with contents is not a killed Mkdir's.
	switch err := unix.Rmdir(p); {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
		return false, nil
	default:
		return false, fmt.Errorf("sweep %s: %w", p, err)
	}
}

// madeByMkdir reports whether name is prefix, "p", digits and "-", as
// Mkdir names directories. Another name with the same prefix (made by an
// older version, or by hand) has no lock to tell its owner's state by,
// and is never swept.
func madeByMkdir(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix+"p")
	if !ok {
		return false
	}
	pid, _, ok := strings.Cut(rest, "-")
	if !ok || pid == "" {
		return false
	}
	_, err := strconv.ParseUint(pid, 10, 32)
	return err == nil
}

// ownerDead takes p's lock without waiting: it is free only when the
// owner has exited. The lock is released again at once (the directory is
// removed next; a Mkdir never reuses a name).
func ownerDead(p string) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil // removed meanwhile
		}
		return false, fmt.Errorf("sweep %s: %w", p, err)
	}
	defer f.Close()
	switch err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); {
	case err == nil:
		// A live owner drops its lock once Remove has removed the
		// directory: only a directory still at p is a dead owner's.
		return stillAt(f, p), nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return false, nil
	default:
		return false, fmt.Errorf("sweep %s: lock: %w", p, err)
	}
}

// stillAt reports whether the open directory f is still the one at p.
func stillAt(f *os.File, p string) bool {
	open, err1 := f.Stat()
	now, err2 := os.Lstat(p)
	return err1 == nil && err2 == nil && os.SameFile(open, now)
}

// unmountBelow detaches every mount at or below p, deepest first. Without
// the right to unmount it does nothing: RemoveAll then fails on what is
// mounted and says so.
func unmountBelow(p string) error {
	mounts, err := mountsBelow(p)
	if err != nil || len(mounts) == 0 {
		return err
	}
	var errs []error
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// mountsBelow lists the mount points at or below p, deepest first, from
// /proc/self/mountinfo.
func mountsBelow(p string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, nil // no procfs: nothing we could unmount by name
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		m := unescapeMount(fields[4])
		if m == p || strings.HasPrefix(m, p+"/") {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ForceRemoveAll removes dir even when a sandboxed program left
// directories in it without write or search permission.
func ForceRemoveAll(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A verifier is a script: rlpipe cannot open its files for it. So before
// it runs, the final workspace is checked for anything the script could be
// led by: a path it opens is then a regular file or a directory of the
// workspace, or a symlink that resolves beneath it.

// unsafeHint ends the reason of StatusUnsafePath.
const unsafeHint = "a verifier opens only regular files, directories and links that stay in the workspace"

// maxUnsafeListed bounds the paths a reason of StatusUnsafePath names.
const maxUnsafeListed = 10

// unsafePaths walks the workspace root (without following a link) and
// describes, in path order, each entry the episode made that a verifier
// must not open: a symlink that does not resolve beneath root (absolute,
// climbing out with "..", or through a magic link of /proc), a FIFO (which
// would hold the verifier until its wall limit), a socket or a device.
// Entries the world holds as they are (its own links, say a venv's
// python) are the task author's and pass. Every process of the episode has
// ended, so nothing changes the tree under the walk.
func unsafePaths(root, world string) ([]string, error) { return checkPaths(root, world, false) }

// checkPaths is unsafePaths; strict also flags a link the episode made
// that resolves to nothing beneath root (see UnsafePaths).
func checkPaths(root, world string, strict bool) ([]string, error) {
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", root, err)
	}
	defer unix.Close(rootFd)
	var found []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil && p != root {
			// A directory the episode made unreadable (mode 000, when
			// rlpipe is not root) could hide anything: it counts too.
			rel, _ := filepath.Rel(root, p)
			why := err
			var pe *fs.PathError
			if errors.As(err, &pe) {
				why = pe.Err
			}
			found = append(found, filepath.ToSlash(rel)+" cannot be checked ("+why.Error()+")")
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if err != nil {
			return err
		}
		t := d.Type()
		if t.IsDir() || t.IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if sameAsWorld(world, rel, p, t) {
			return nil
		}
		what := ""
		switch {
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if !staysBeneath(rootFd, rel, strict) {
				what = "a symlink to " + target + ", out of the workspace"
			}
		case t&fs.ModeNamedPipe != 0:
			what = "a named pipe (FIFO)"
		case t&fs.ModeSocket != 0:
			what = "a socket"
		case t&fs.ModeDevice != 0:
			what = "a device"
		default:
			what = "not a regular file (" + t.String() + ")"
		}
		if what != "" {
			found = append(found, filepath.ToSlash(rel)+" is "+what)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("check the workspace for paths out of it: %w", err)
	}
	return found, nil
}

// staysBeneath reports whether the link rel resolves beneath the directory
// root names, following links only there and no magic link. A dangling
// link inside stays beneath: it opens nothing. On a kernel without
// openat2 (before Linux 5.6) no link the episode made passes. With
// strict, a dangling link does not pass either.
func staysBeneath(rootFd int, rel string, strict bool) bool {
	fd, err := unix.Openat2(rootFd, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err == nil {
		unix.Close(fd)
		return true
	}
	return !strict && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR))
}

// sameAsWorld reports whether the entry at rel (host path p, type t) is the
// world's own: the same type there, the same target for a link, the same
// device number for a device.
func sameAsWorld(world, rel, p string, t fs.FileMode) bool {
	wi, err := os.Lstat(filepath.Join(world, rel))
	if err != nil || wi.Mode().Type() != t {
		return false
	}
	switch {
	case t&fs.ModeSymlink != 0:
		a, err1 := os.Readlink(p)
		b, err2 := os.Readlink(filepath.Join(world, rel))
		return err1 == nil && err2 == nil && a == b
	case t&fs.ModeDevice != 0:
		var a, b unix.Stat_t
		return unix.Lstat(p, &a) == nil && unix.Lstat(filepath.Join(world, rel), &b) == nil && a.Rdev == b.Rdev
	}
	return true
}

// unsafeReason is the reason of StatusUnsafePath for found.
func unsafeReason(found []string) string {
	listed := found
	if len(found) > maxUnsafeListed {
		listed = append(found[:maxUnsafeListed:maxUnsafeListed], fmt.Sprintf("and %d more", len(found)-maxUnsafeListed))
	}
	return "the verifier did not run: " + strings.Join(listed, "; ") + "; " + unsafeHint
}

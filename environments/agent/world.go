package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sync"

	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/internal/scratch"
	"github.com/rlpipe/rlpipe/sandbox"
)

// WorldSpec defines a world: the files an agent starts from. A world is
// made from Source, then Files, then Build, in that order; any may be
// missing, but not all.
type WorldSpec struct {
	// Name labels the world in errors; it is not part of the digest.
	Name string
	// Source is a host directory whose tree (files, directories, symlinks,
	// permissions) is copied into the world.
	Source string
	// Files are written into the world: slash-separated relative paths to
	// contents, mode 0644.
	Files map[string][]byte
	// Build runs on the host with the world's directory, after Source and
	// Files, and may write anything there (run a generator, unpack an
	// archive, git-clone a fixture).
	Build func(ctx context.Context, dir string) error
	// Version stands for Build in the digest, since code cannot be hashed:
	// change it whenever Build changes what it writes.
	Version string
}

// World is a world built in a cache: an immutable directory tree, shared
// read-only by every episode of it.
type World struct {
	Name string
	// Digest identifies the world's definition: "sha256:…" of Version,
	// Files and Source's tree.
	Digest string
	// Dir is the tree on the host. Never write to it: episodes see it
	// through their copy-on-write workspaces.
	Dir string
	// Built reports whether this call built the world (false: it was in
	// the cache).
	Built bool
}

// Cache builds worlds once and keeps them under a directory, one
// subdirectory per digest. It is safe for concurrent use, also by several
// processes sharing the directory.
type Cache struct {
	dir string

	mu       sync.Mutex
	building map[string]*sync.Mutex
}

// NewCache opens (creating it if needed, mode 0700) the cache directory dir.
func NewCache(dir string) (*Cache, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("world cache %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("world cache %s: %w", dir, err)
	}
	return &Cache{dir: abs, building: map[string]*sync.Mutex{}}, nil
}

// Dir returns the cache directory.
func (c *Cache) Dir() string { return c.dir }

// World returns the world spec defines, building it unless the cache holds
// it already. A world is built in a temporary directory and renamed into
// place when complete, so a failed or interrupted build leaves nothing
// behind; its files then belong to the sandbox's user (sandbox.SandboxUID),
// so that episodes may change their copies.
func (c *Cache) World(ctx context.Context, spec WorldSpec) (*World, error) {
	if spec.Source == "" && len(spec.Files) == 0 && spec.Build == nil {
		return nil, fmt.Errorf("world %q: no Source, Files or Build: %w", spec.Name, ErrInvalid)
	}
	if spec.Build == nil && spec.Version != "" {
		return nil, fmt.Errorf("world %q: Version is set without Build: %w", spec.Name, ErrInvalid)
	}
	if spec.Build != nil && spec.Version == "" {
		return nil, fmt.Errorf("world %q: Build needs a Version naming its definition: %w", spec.Name, ErrInvalid)
	}
	for name := range spec.Files {
		if name == "." || !filepath.IsLocal(name) || path.Clean(name) != name {
			return nil, fmt.Errorf("world %q: file %q: want a clean relative path: %w", spec.Name, name, ErrInvalid)
		}
	}
	digest, err := spec.digest()
	if err != nil {
		return nil, err
	}
	w := &World{Name: spec.Name, Digest: "sha256:" + digest, Dir: filepath.Join(c.dir, digest)}

	c.mu.Lock()
	lock, ok := c.building[digest]
	if !ok {
		lock = &sync.Mutex{}
		c.building[digest] = lock
	}
	c.mu.Unlock()
	lock.Lock()
	defer lock.Unlock()

	if fi, err := os.Stat(w.Dir); err == nil && fi.IsDir() {
		return w, nil
	}
	tmp, err := os.MkdirTemp(c.dir, ".build-"+digest[:12]+"-")
	if err != nil {
		return nil, fmt.Errorf("build world %q: %w", spec.Name, err)
	}
	defer scratch.ForceRemoveAll(tmp)
	if err := spec.build(ctx, tmp); err != nil {
		return nil, fmt.Errorf("build world %q: %w", spec.Name, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("build world %q: %w", spec.Name, err)
	}
	if os.Geteuid() == 0 {
		if err := chownTree(tmp); err != nil {
			return nil, fmt.Errorf("build world %q: %w", spec.Name, err)
		}
	}
	if err := os.Rename(tmp, w.Dir); err != nil {
		// Another process built it first.
		if fi, serr := os.Stat(w.Dir); serr == nil && fi.IsDir() {
			return w, nil
		}
		return nil, fmt.Errorf("build world %q: %w", spec.Name, err)
	}
	w.Built = true
	return w, nil
}

func (spec WorldSpec) build(ctx context.Context, dir string) error {
	if spec.Source != "" {
		// cp keeps modes, symlinks and special files as they are.
		out, err := exec.CommandContext(ctx, "cp", "-a", "--", spec.Source+"/.", dir).CombinedOutput()
		if err != nil {
			return fmt.Errorf("copy %s: %v: %s", spec.Source, err, out)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Files)) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, spec.Files[name], 0o644); err != nil {
			return err
		}
	}
	if spec.Build != nil {
		if err := spec.Build(ctx, dir); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// digest hashes what defines the world: Version, Files and Source's tree.
func (spec WorldSpec) digest() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "rlpipe world v1\nversion %q\nbuild %v\n", spec.Version, spec.Build != nil)
	for _, name := range slices.Sorted(maps.Keys(spec.Files)) {
		fmt.Fprintf(h, "file %q %d\n", name, len(spec.Files[name]))
		h.Write(spec.Files[name])
	}
	if spec.Source != "" {
		fmt.Fprintf(h, "source\n")
		if err := hashTree(h, spec.Source); err != nil {
			return "", fmt.Errorf("world %q: hash source: %w", spec.Name, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// TreeDigest returns the SHA-256 of a directory tree: each entry's path,
// type, permissions and content (a symlink's target), in path order. Two
// trees with the same digest hold the same files.
func TreeDigest(dir string) (string, error) {
	h := sha256.New()
	if err := hashTree(h, dir); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func hashTree(h io.Writer, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		return hashEntry(h, p, filepath.ToSlash(rel), d)
	})
}

// hashEntry writes one entry of a tree, at host path p and slash-separated
// relative path rel, to h: its path, type and permissions, a regular
// file's size and content, a symlink's target.
func hashEntry(h io.Writer, p, rel string, d fs.DirEntry) error {
	info, err := d.Info()
	if err != nil {
		return err
	}
	mode := info.Mode()
	fmt.Fprintf(h, "%q %s\n", rel, mode.String())
	switch {
	case mode.IsRegular():
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(h, "%d\n", info.Size())
		_, err = io.Copy(h, f)
		return err
	case mode&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "-> %q\n", target)
	}
	return nil
}

// chownTree gives every entry of dir to the sandbox's user.
func chownTree(dir string) error {
	uid, gid := sandbox.SandboxUID()
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// ErrInvalid: a world spec, workspace option or task is wrong.
var ErrInvalid = errors.New("invalid agent environment")

// ErrInfra wraps environments.ErrInfra: a workspace could not be set up or
// a sandbox could not start.
var ErrInfra = fmt.Errorf("agent: %w", environments.ErrInfra)

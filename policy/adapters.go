package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/rlpipe/rlpipe/internal/filecopy"
)

// ErrAdapterInput marks an Adapters.Load failure that retrying cannot fix:
// the policy cannot load the checkpoint's kind (AdapterLoader,
// WeightsLoader), the directory cannot be read or is not a checkpoint
// (ErrCheckpoint; ErrShards for weights whose shards do not match their
// index), or its tensors do not fit the policy (the error then also
// matches ErrAdapterShape or ErrWeightsShape). A stage turns it into a
// permanent task failure; other Load errors (a copy to a full disk, a
// server that is down) are worth another attempt.
var ErrAdapterInput = errors.New("adapter input cannot be loaded")

// Adapters loads policy checkpoint directories, PEFT adapters or full
// weights, into a policy by content digest and unloads old ones: what a
// rollout or evaluation task needs to sample from a checkpoint. It is
// safe for concurrent use.
type Adapters struct {
	policy   Policy
	identity string
	root     string
	keep     int

	mu     sync.Mutex
	loaded map[string]int // checkpoint name → load sequence number
	stuck  []string       // evicted, but the server did not confirm the unload
	seq    int
}

// NewAdapters returns a loader for p. root, when set, is a directory the
// policy's server can read: checkpoints are copied there before loading,
// and a copy is removed only once the server has unloaded it, since a
// server may read an adapter's files again at any time while it holds it
// (vLLM reloads an adapter its LoRA cache evicted). Without root the
// policy is given the caller's directory, which must then outlive every
// use: right for a policy that reads the files once, in LoadAdapter or
// LoadWeights (the embedded model). keep (default 3) is how many
// checkpoints stay loaded.
func NewAdapters(p Policy, identity, root string, keep int) *Adapters {
	if keep <= 0 {
		keep = 3
	}
	return &Adapters{policy: p, identity: identity, root: root, keep: keep, loaded: map[string]int{}}
}

// The name prefixes of loaded checkpoints, by kind.
const (
	adapterPrefix = "adapter-"
	weightsPrefix = "weights-"
)

// checkpointLoader is the policy's loader of one kind of checkpoint.
type checkpointLoader struct {
	what   string // "adapter" or "weights", in messages
	load   func(ctx context.Context, name, dir string) error
	unload func(ctx context.Context, name string) error
}

// loaderFor returns the policy's loader of kind k, or an error saying the
// policy cannot load it.
func (g *Adapters) loaderFor(k Kind) (checkpointLoader, error) {
	switch k {
	case KindWeights:
		if l, ok := g.policy.(WeightsLoader); ok {
			return checkpointLoader{"weights", l.LoadWeights, l.UnloadWeights}, nil
		}
		return checkpointLoader{}, fmt.Errorf("the policy input is a full-weights checkpoint, but policy %s cannot load weights (policy.WeightsLoader); train with LoRA or use a policy kind that loads weights", g.identity)
	default:
		if l, ok := g.policy.(AdapterLoader); ok {
			return checkpointLoader{"adapter", l.LoadAdapter, l.UnloadAdapter}, nil
		}
		return checkpointLoader{}, fmt.Errorf("the policy input is an adapter, but policy %s cannot load adapters", g.identity)
	}
}

// kindOf is the kind of a loaded checkpoint's name.
func kindOf(name string) Kind {
	if strings.HasPrefix(name, weightsPrefix) {
		return KindWeights
	}
	return KindAdapter
}

// Load makes the checkpoint directory dir available to the policy and
// returns its name: "adapter-<12 hex of its content digest>" for a PEFT
// adapter, loaded through AdapterLoader, or "weights-<12 hex>" for a
// full-weights model directory (CheckpointKind), checked with CheckShards
// and loaded through WeightsLoader; so the same checkpoint is loaded once
// however many tasks ask for it, and the name is what rows record as the
// policy version either way. Errors that retrying cannot fix match
// ErrAdapterInput.
func (g *Adapters) Load(ctx context.Context, dir string) (string, error) {
	kind, err := CheckpointKind(dir)
	if err != nil {
		return "", unloadable{err}
	}
	l, err := g.loaderFor(kind)
	if err != nil {
		return "", unloadable{err}
	}
	prefix := adapterPrefix
	if kind == KindWeights {
		prefix = weightsPrefix
		if err := CheckShards(dir); err != nil {
			return "", unloadable{err}
		}
	}
	digest, err := DirDigest(dir)
	if err != nil {
		return "", unloadable{fmt.Errorf("read %s %s: %w", l.what, dir, err)}
	}
	name := prefix + digest[:12]
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.loaded[name]; ok {
		return name, nil
	}
	path := dir
	if g.root != "" {
		path = filepath.Join(g.root, name)
		if err := copyDir(dir, path); err != nil {
			return "", fmt.Errorf("copy %s to %s: %w", l.what, path, err)
		}
	}
	if err := l.load(ctx, name, path); err != nil {
		if errors.Is(err, ErrAdapterShape) || errors.Is(err, ErrWeightsShape) {
			err = unloadable{err}
		}
		return "", fmt.Errorf("load %s %s: %w", l.what, name, err)
	}
	g.seq++
	g.loaded[name] = g.seq
	// Unload the oldest beyond keep; a failure only costs memory.
	for len(g.loaded) > g.keep {
		oldest, at := "", g.seq+1
		for n, s := range g.loaded {
			if s < at {
				oldest, at = n, s
			}
		}
		delete(g.loaded, oldest)
		g.unload(ctx, oldest)
	}
	return name, nil
}

// unload unloads name and removes its copy under root once the server has
// let go of it; a failed unload costs only memory, and Close tries again.
func (g *Adapters) unload(ctx context.Context, name string) error {
	l, err := g.loaderFor(kindOf(name))
	if err != nil {
		return nil // never loaded: nothing to unload
	}
	if err := l.unload(ctx, name); err != nil {
		g.stuck = append(g.stuck, name)
		return err
	}
	if g.root != "" {
		return os.RemoveAll(filepath.Join(g.root, name))
	}
	return nil
}

// Close unloads every checkpoint the loader holds, and those whose unload
// failed before, removing their copies under root: what a run leaves on
// a server it shares. A checkpoint the server does not confirm unloading
// keeps its copy, so that the server can still read it; a rerun loads it
// from the same path.
func (g *Adapters) Close(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	names := g.stuck
	g.stuck = nil
	for n := range g.loaded {
		names = append(names, n)
	}
	sort.Strings(names)
	clear(g.loaded)
	var errs []error
	for _, n := range names {
		if err := g.unload(ctx, n); err != nil {
			errs = append(errs, fmt.Errorf("unload %s %s: %w", kindOf(n), n, err))
		}
	}
	return errors.Join(errs...)
}

// LocalAdapterRoot is the directory a policy server on this machine reads
// adapters from when the policy section names no adapter_root: rlpipe's
// folder in the user's cache directory (~/.cache/rlpipe/adapters), which
// outlives the tasks that load adapters, as a server that may re-read an
// adapter needs. A server running as another user must be able to read
// it, or be given an adapter_root.
func LocalAdapterRoot() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find a folder for adapters (set adapter_root): %w", err)
	}
	dir := filepath.Join(base, "rlpipe", "adapters")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("make the folder for adapters (set adapter_root): %w", err)
	}
	return dir, nil
}

// Forget drops name from the loaded set, so the next Load loads it again
// (a server that restarted has forgotten it).
func (g *Adapters) Forget(name string) {
	g.mu.Lock()
	delete(g.loaded, name)
	g.mu.Unlock()
}

// unloadable adds ErrAdapterInput to an error's chain, keeping its message.
type unloadable struct{ err error }

func (u unloadable) Error() string   { return u.err.Error() }
func (u unloadable) Unwrap() []error { return []error{u.err, ErrAdapterInput} }

// DirDigest is the SHA-256 of a directory's regular files: their slash
// paths and contents, in path order.
func DirDigest(dir string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		if err := hashFile(h, f, filepath.Join(dir, filepath.FromSlash(f))); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashFile writes "<rel>\x00<size>\x00<contents>" of the file at path to
// h, streaming, so a multi-GB shard is never whole in memory.
func hashFile(h io.Writer, rel, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	fmt.Fprintf(h, "%s\x00%d\x00", rel, st.Size())
	n, err := io.Copy(h, f)
	if err == nil && n != st.Size() {
		err = fmt.Errorf("%s changed size while it was read", path)
	}
	return err
}

// copyDir copies src's regular files into dst (created), through a
// temporary directory renamed into place so a reader never sees half a
// checkpoint.
func copyDir(src, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil // content-addressed: already there
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".tmp-adapter-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(tmp, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		return filecopy.File(p, target)
	})
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil && !errors.Is(err, fs.ErrExist) {
		if _, statErr := os.Stat(dst); statErr == nil {
			return nil // another call won the race with the same content
		}
		return err
	}
	return nil
}

// LoadedAdapter is an adapter a client or server has loaded: the name it
// is served as and the directory it was loaded from.
type LoadedAdapter struct {
	Name, Dir string
}

// LoadedAdapters is the adapters a client or server has loaded, oldest
// first.
type LoadedAdapters []LoadedAdapter

// Names lists the adapters' names, oldest first.
func (l LoadedAdapters) Names() []string {
	out := make([]string, len(l))
	for i, a := range l {
		out[i] = a.Name
	}
	return out
}

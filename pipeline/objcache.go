package pipeline

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/rlpipe/rlpipe/internal/filecopy"
	"github.com/rlpipe/rlpipe/internal/scratch"
)

// objectCache keeps, for a process whose store is remote (a Worker, or a
// run whose executor sends tasks elsewhere), local copies of the objects
// its attempts put or read, by the checksum the store recorded for them.
// A later attempt of the same process that reads an input of a known
// checksum (a job's inputs carry them) copies it from here instead of a
// stat and a read over the network: a generate call reads the adapter
// the previous train call of the same worker wrote, and a train call the
// trajectories of that worker's generate call.
//
// An output is linked in (its attempt's directory is removed once the
// output is put; a file changed after that, by a process the task left
// behind, no longer matches the size and time recorded and is dropped);
// an input read over the
// network is copied in before the task sees it, since a task may change
// its own input files. Attempts get copies, never links, for the same
// reason. The least recently used objects go when the cache holds more
// than max bytes. The directory is a scratch directory of this process:
// a killed process's is swept with the attempts' work directories.
type objectCache struct {
	parent string
	max    int64

	mu      sync.Mutex
	dir     *scratch.Dir
	failed  bool
	closed  bool
	entries map[string]*list.Element // checksum → *cached
	lru     list.List                // front: most recently used
	size    int64
	seq     int
}

type cached struct {
	sum, path string
	size      int64
	mod       time.Time
}

// objectCacheBytes caps an object cache: a few iterations' adapters and
// tables of the demos, and far less than a full model's weights, which
// are read once per worker anyway.
const objectCacheBytes = 512 << 20

func newObjectCache(parent string) *objectCache {
	return &objectCache{parent: parent, max: objectCacheBytes, entries: map[string]*list.Element{}}
}

// get copies the object of checksum sum to dst and reports whether the
// cache had it.
func (c *objectCache) get(sum, dst string) bool {
	if c == nil || sum == "" {
		return false
	}
	c.mu.Lock()
	e, ok := c.entries[sum]
	var o cached
	if ok {
		c.lru.MoveToFront(e)
		o = *e.Value.(*cached)
	}
	c.mu.Unlock()
	if !ok {
		return false
	}
	if fi, err := os.Stat(o.path); err != nil || fi.Size() != o.size || !fi.ModTime().Equal(o.mod) {
		c.drop(sum)
		return false
	}
	// A copy made while the entry is evicted fails to open its file and
	// is a miss.
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false
	}
	if err := filecopy.File(o.path, dst); err != nil {
		_ = os.Remove(dst)
		return false
	}
	return true
}

// drop forgets the object of checksum sum.
func (c *objectCache) drop(sum string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[sum]; ok {
		c.removeLocked(e)
	}
}

func (c *objectCache) removeLocked(e *list.Element) {
	o := e.Value.(*cached)
	c.lru.Remove(e)
	delete(c.entries, o.sum)
	c.size -= o.size
	_ = os.Remove(o.path)
}

// wants returns the largest object of checksum sum read from the store
// that should be hashed as it is read, to go into the cache, or 0 for
// none: a cache that is open takes objects up to a quarter of its cap
// whose checksum is a SHA-256 (the store's, when it recorded one), which
// the bytes are checked against before they go in.
func (c *objectCache) wants(sum string) int64 {
	if c == nil || len(sum) != sha256.Size*2 {
		return 0
	}
	if _, err := hex.DecodeString(sum); err != nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0
	}
	return c.max / 4
}

// add keeps the file at src as the object of checksum sum. An output
// that was put comes with before, the file as it was before the put: it
// is linked (nothing writes it any more), and kept only if it still has
// before's size and time. An input read from the store (before nil) is
// copied.
func (c *objectCache) add(sum, src string, before os.FileInfo) {
	if c == nil || sum == "" {
		return
	}
	fi, err := os.Lstat(src)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > c.max/4 ||
		before != nil && (fi.Size() != before.Size() || !fi.ModTime().Equal(before.ModTime())) {
		return
	}
	c.mu.Lock()
	if _, ok := c.entries[sum]; ok {
		c.mu.Unlock()
		return
	}
	dir := c.dirLocked()
	c.seq++
	dst := filepath.Join(dir, strconv.Itoa(c.seq))
	c.mu.Unlock()
	if dir == "" {
		return
	}
	if before == nil || os.Link(src, dst) != nil {
		if filecopy.File(src, dst) != nil {
			_ = os.Remove(dst)
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[sum]; ok || c.closed {
		_ = os.Remove(dst)
		return
	}
	kept, err := os.Lstat(dst)
	if err != nil || kept.Size() != fi.Size() || before != nil && !kept.ModTime().Equal(before.ModTime()) {
		_ = os.Remove(dst)
		return
	}
	c.entries[sum] = c.lru.PushFront(&cached{sum: sum, path: dst, size: kept.Size(), mod: kept.ModTime()})
	c.size += kept.Size()
	for c.size > c.max {
		c.removeLocked(c.lru.Back())
	}
}

// dirLocked makes the cache's directory on first use; "" when it cannot
// be made (the cache is then off: every read goes to the store).
func (c *objectCache) dirLocked() string {
	if c.closed {
		return ""
	}
	if c.dir == nil && !c.failed {
		d, err := scratch.Mkdir(c.parent, taskDirPrefix)
		if err != nil {
			c.failed = true
			return ""
		}
		c.dir = d
	}
	if c.dir == nil {
		return ""
	}
	return c.dir.Path()
}

// close removes the cache's files; the cache is off from then on.
func (c *objectCache) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.dir != nil {
		c.dir.Remove()
		c.dir = nil
	}
	c.entries, c.size = map[string]*list.Element{}, 0
	c.lru.Init()
}

package pipeline

import (
	"container/list"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

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
	if err := copyFile(o.path, dst); err != nil {
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

// add keeps the file at src as the object of checksum sum: linked when
// nothing will write src again (an output that was put), else copied.
func (c *objectCache) add(sum, src string, link bool) {
	if c == nil || sum == "" {
		return
	}
	fi, err := os.Stat(src)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > c.max/4 {
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
	if !link || os.Link(src, dst) != nil {
		if copyFile(src, dst) != nil {
			_ = os.Remove(dst)
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[sum]; ok {
		_ = os.Remove(dst)
		return
	}
	kept, err := os.Stat(dst)
	if err != nil || kept.Size() != fi.Size() {
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

// close removes the cache's files.
func (c *objectCache) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dir != nil {
		c.dir.Remove()
		c.dir = nil
	}
	c.entries, c.size = map[string]*list.Element{}, 0
	c.lru.Init()
}

// copyFile copies src to a new file dst, making dst's directory.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

package local

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// A commit's contents are a two-level tree, as in lakeFS: a metarange lists
// ranges, and each range holds a sorted run of entries. Range boundaries
// are content-defined (a range ends after an entry whose path hashes to a
// boundary, or after maxRangeEntries), so the tree is a pure function of
// its entries: equal contents give equal ids, and two trees that differ in
// a few paths share every other range. Commit, diff and merge touch only
// the ranges that changed.

const (
	boundaryMask    = 63 // about 64 entries a range
	maxRangeEntries = 4096
)

// entry is one committed object. (Staged entries are stored as JSON.)
type entry struct {
	Path        string            `json:"p"`
	Digest      string            `json:"d"`
	Size        int64             `json:"s"`
	Mtime       int64             `json:"t"` // unix nanoseconds
	ContentType string            `json:"c,omitempty"`
	Metadata    map[string]string `json:"m,omitempty"`
}

// sameContent reports whether two entries describe the same object version
// (mtime aside): what diff and merge compare.
func (e *entry) sameContent(o *entry) bool {
	if e.Digest != o.Digest || e.ContentType != o.ContentType || len(e.Metadata) != len(o.Metadata) {
		return false
	}
	for k, v := range e.Metadata {
		if ov, ok := o.Metadata[k]; !ok || ov != v {
			return false
		}
	}
	return true
}

// rangeRef names a range and the span of paths it covers.
type rangeRef struct {
	ID    string
	Min   string
	Max   string
	Count int
}

type metaRange []rangeRef

func isBoundary(path string) bool {
	h := fnv.New64a()
	h.Write([]byte(path))
	return h.Sum64()&boundaryMask == 0
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// emptyMetaRangeID is the id of the tree with no entries.
var emptyMetaRangeID = digestOf(encodeMeta(nil))

// treeCache holds decoded ranges and metaranges; both are immutable, so
// entries never go stale.
type treeCache struct {
	mu     sync.Mutex
	ranges map[string][]entry
	metas  map[string]metaRange
	seen   map[string]struct{} // metaranges and ranges a lookup read in place once
	size   int
}

const treeCacheEntries = 1 << 20 // total entries kept decoded

func newTreeCache() *treeCache {
	return &treeCache{ranges: map[string][]entry{}, metas: map[string]metaRange{}, seen: map[string]struct{}{}}
}

func (c *treeCache) getRange(id string) ([]entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.ranges[id]
	return e, ok
}

func (c *treeCache) putRange(id string, e []entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.size+len(e) > treeCacheEntries {
		c.ranges, c.size = map[string][]entry{}, 0
	}
	c.ranges[id] = e
	c.size += len(e)
}

// again reports whether a lookup read the metarange or range id before
// without decoding it, and notes that one has now.
func (c *treeCache) again(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[id]; ok {
		return true
	}
	if len(c.seen) > 4096 {
		c.seen = map[string]struct{}{}
	}
	c.seen[id] = struct{}{}
	return false
}

func (c *treeCache) getMeta(id string) (metaRange, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.metas[id]
	return m, ok
}

func (c *treeCache) putMeta(id string, m metaRange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.metas) > 4096 {
		c.metas = map[string]metaRange{}
	}
	c.metas[id] = m
}

// trees reads and writes ranges and metaranges inside one transaction.
type trees struct {
	tx    *bolt.Tx
	cache *treeCache
}

func (t trees) loadMeta(id string) (metaRange, error) {
	if id == emptyMetaRangeID {
		return nil, nil
	}
	if m, ok := t.cache.getMeta(id); ok {
		return m, nil
	}
	b := t.tx.Bucket(bucketMetaRanges).Get([]byte(id))
	if b == nil {
		return nil, fmt.Errorf("%w: metarange %s is missing from the store", errCorruptMeta, id)
	}
	m, err := decodeMeta(b)
	if err != nil {
		return nil, fmt.Errorf("%w: metarange %s: %v", errCorruptMeta, id, err)
	}
	t.cache.putMeta(id, m)
	return m, nil
}

func (t trees) loadRange(id string) ([]entry, error) {
	if e, ok := t.cache.getRange(id); ok {
		return e, nil
	}
	b := t.tx.Bucket(bucketRanges).Get([]byte(id))
	if b == nil {
		return nil, fmt.Errorf("%w: range %s is missing from the store", errCorruptMeta, id)
	}
	e, err := decodeEntries(b)
	if err != nil {
		return nil, fmt.Errorf("%w: range %s: %v", errCorruptMeta, id, err)
	}
	t.cache.putRange(id, e)
	return e, nil
}

// lookup finds path in the tree, or returns nil. A metarange or a range
// is decoded and cached the second time a lookup reads it; the first
// reads it in place (findRange, findEntry), so reading one file from each
// of many commits (a run's metrics, iteration by iteration) costs no
// decode of each tree.
func (t trees) lookup(metaID, path string) (*entry, error) {
	var rangeID string
	if m, ok := t.cache.getMeta(metaID); ok || metaID == emptyMetaRangeID || t.cache.again(metaID) {
		if !ok {
			var err error
			if m, err = t.loadMeta(metaID); err != nil {
				return nil, err
			}
		}
		i := sort.Search(len(m), func(i int) bool { return m[i].Max >= path })
		if i == len(m) || m[i].Min > path {
			return nil, nil
		}
		rangeID = m[i].ID
	} else {
		b := t.tx.Bucket(bucketMetaRanges).Get([]byte(metaID))
		if b == nil {
			return nil, fmt.Errorf("%w: metarange %s is missing from the store", errCorruptMeta, metaID)
		}
		var err error
		if rangeID, err = findRange(b, path); err != nil {
			return nil, fmt.Errorf("%w: metarange %s: %v", errCorruptMeta, metaID, err)
		}
		if rangeID == "" {
			return nil, nil
		}
	}
	if _, ok := t.cache.getRange(rangeID); !ok && !t.cache.again(rangeID) {
		// Read once so far: find the entry in place (findEntry).
		b := t.tx.Bucket(bucketRanges).Get([]byte(rangeID))
		if b == nil {
			return nil, fmt.Errorf("%w: range %s is missing from the store", errCorruptMeta, rangeID)
		}
		e, err := findEntry(b, path)
		if err != nil {
			return nil, fmt.Errorf("%w: range %s: %v", errCorruptMeta, rangeID, err)
		}
		return e, nil
	}
	es, err := t.loadRange(rangeID)
	if err != nil {
		return nil, err
	}
	j := sort.Search(len(es), func(j int) bool { return es[j].Path >= path })
	if j < len(es) && es[j].Path == path {
		e := es[j]
		return &e, nil
	}
	return nil, nil
}

// builder writes a canonical tree from entries fed in path order.
type builder struct {
	t       trees
	out     metaRange
	pending []entry
}

func (b *builder) add(e entry) error {
	b.pending = append(b.pending, e)
	if isBoundary(e.Path) || len(b.pending) >= maxRangeEntries {
		return b.flush()
	}
	return nil
}

// reuse appends an existing range unchanged; only valid between ranges.
func (b *builder) reuse(r rangeRef) { b.out = append(b.out, r) }

func (b *builder) flush() error {
	if len(b.pending) == 0 {
		return nil
	}
	data := encodeEntries(b.pending)
	id := digestOf(data)
	bk := b.t.tx.Bucket(bucketRanges)
	if bk.Get([]byte(id)) == nil {
		if err := bk.Put([]byte(id), data); err != nil {
			return err
		}
	}
	b.out = append(b.out, rangeRef{ID: id, Min: b.pending[0].Path, Max: b.pending[len(b.pending)-1].Path, Count: len(b.pending)})
	b.pending = nil
	return nil
}

func (b *builder) finish() (string, error) {
	if err := b.flush(); err != nil {
		return "", err
	}
	if len(b.out) == 0 {
		return emptyMetaRangeID, nil
	}
	data := encodeMeta(b.out)
	id := digestOf(data)
	bk := b.t.tx.Bucket(bucketMetaRanges)
	if bk.Get([]byte(id)) == nil {
		if err := bk.Put([]byte(id), data); err != nil {
			return "", err
		}
	}
	return id, nil
}

// change sets (Entry != nil) or removes (Entry == nil) one path.
type change struct {
	Path  string
	Entry *entry
}

// apply returns the id of the tree base with changes (sorted by path, one
// per path) applied. Ranges no change falls into are reused as they are.
func (t trees) apply(baseID string, changes []change) (string, error) {
	base, err := t.loadMeta(baseID)
	if err != nil {
		return "", err
	}
	b := &builder{t: t}
	ci := 0
	for ri, r := range base {
		j := ci
		for j < len(changes) && (ri == len(base)-1 || changes[j].Path <= r.Max) {
			j++
		}
		if j == ci && len(b.pending) == 0 {
			b.reuse(r)
			continue
		}
		es, err := t.loadRange(r.ID)
		if err != nil {
			return "", err
		}
		if err := mergeInto(b, es, changes[ci:j]); err != nil {
			return "", err
		}
		ci = j
	}
	if err := mergeInto(b, nil, changes[ci:]); err != nil {
		return "", err
	}
	return b.finish()
}

// mergeInto feeds the union of sorted entries and changes to b.
func mergeInto(b *builder, es []entry, chs []change) error {
	i, j := 0, 0
	for i < len(es) || j < len(chs) {
		switch {
		case j == len(chs) || (i < len(es) && es[i].Path < chs[j].Path):
			if err := b.add(es[i]); err != nil {
				return err
			}
			i++
		default:
			if i < len(es) && es[i].Path == chs[j].Path {
				i++
			}
			if chs[j].Entry != nil {
				if err := b.add(*chs[j].Entry); err != nil {
					return err
				}
			}
			j++
		}
	}
	return nil
}

// cursor walks a tree's entries in path order, loading ranges lazily so a
// caller can skip whole ranges by id.
type cursor struct {
	t   trees
	m   metaRange
	ri  int
	es  []entry // entries of m[ri] once loaded
	ei  int
	err error
}

func newCursor(t trees, metaID string) (*cursor, error) {
	m, err := t.loadMeta(metaID)
	if err != nil {
		return nil, err
	}
	return &cursor{t: t, m: m}, nil
}

// seek moves to the first entry with path >= key.
func (c *cursor) seek(key string) error {
	c.ri = sort.Search(len(c.m), func(i int) bool { return c.m[i].Max >= key })
	c.es, c.ei = nil, 0
	if c.ri == len(c.m) {
		return nil
	}
	if err := c.load(); err != nil {
		return err
	}
	c.ei = sort.Search(len(c.es), func(j int) bool { return c.es[j].Path >= key })
	return nil
}

func (c *cursor) done() bool { return c.ri >= len(c.m) }

// atRangeStart reports whether the cursor sits on the first entry of a range.
func (c *cursor) atRangeStart() bool { return !c.done() && c.ei == 0 }

func (c *cursor) rangeID() string { return c.m[c.ri].ID }

func (c *cursor) skipRange() {
	c.ri++
	c.es, c.ei = nil, 0
}

func (c *cursor) load() error {
	if c.es == nil && !c.done() {
		es, err := c.t.loadRange(c.m[c.ri].ID)
		if err != nil {
			return err
		}
		c.es = es
	}
	return nil
}

// cur returns the current entry, or nil at the end.
func (c *cursor) cur() (*entry, error) {
	if c.done() {
		return nil, nil
	}
	if err := c.load(); err != nil {
		return nil, err
	}
	return &c.es[c.ei], nil
}

func (c *cursor) next() {
	c.ei++
	if c.ei >= len(c.es) {
		c.skipRange()
	}
}

// treeDiff calls emit for every path whose entry differs between trees a
// and b (under prefix), in path order; left or right is nil when the path
// is absent on that side. Ranges with equal ids on both sides are skipped
// without being read.
func (t trees) treeDiff(aID, bID, prefix string, emit func(path string, left, right *entry) (bool, error)) error {
	if aID == bID {
		return nil
	}
	a, err := newCursor(t, aID)
	if err != nil {
		return err
	}
	b, err := newCursor(t, bID)
	if err != nil {
		return err
	}
	if prefix != "" {
		if err := a.seek(prefix); err != nil {
			return err
		}
		if err := b.seek(prefix); err != nil {
			return err
		}
	}
	for {
		if a.atRangeStart() && b.atRangeStart() && a.rangeID() == b.rangeID() {
			a.skipRange()
			b.skipRange()
			continue
		}
		ea, err := a.cur()
		if err != nil {
			return err
		}
		eb, err := b.cur()
		if err != nil {
			return err
		}
		if ea != nil && !strings.HasPrefix(ea.Path, prefix) {
			ea = nil
		}
		if eb != nil && !strings.HasPrefix(eb.Path, prefix) {
			eb = nil
		}
		var more bool
		switch {
		case ea == nil && eb == nil:
			return nil
		case eb == nil || (ea != nil && ea.Path < eb.Path):
			more, err = emit(ea.Path, ea, nil)
			a.next()
		case ea == nil || eb.Path < ea.Path:
			more, err = emit(eb.Path, nil, eb)
			b.next()
		default:
			if !ea.sameContent(eb) {
				more, err = emit(ea.Path, ea, eb)
			} else {
				more = true
			}
			a.next()
			b.next()
		}
		if err != nil || !more {
			return err
		}
	}
}

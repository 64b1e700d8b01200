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

	"github.com/rlpipe/rlpipe/internal/bounded"
)

// A commit's contents are a tree, as in lakeFS: ranges hold sorted runs
// of entries, and a metarange lists ranges. Range boundaries are
// content-defined (a range ends after an entry whose path hashes to a
// boundary, or after maxRangeEntries), so the tree is a pure function of
// its entries: equal contents give equal ids, and two trees that differ in
// a few paths share every other range. Commit, diff and merge touch only
// the ranges that changed.
//
// A tree of more than maxFlatRanges ranges has more levels, so that what
// a commit writes does not grow with the tree: its list of ranges is cut
// into chunks (level-1 nodes, each a version-1 metarange record listing
// ranges) at content-defined boundaries too: a chunk ends after a range
// whose last path's hash has nodeBits more bits zero (bits 6–9 of the
// same hash, the low six being the range boundary's), or after
// maxNodeRefs ranges. If that makes more than one chunk, the list of
// chunks is cut the same way into level-2 nodes (bits 10–13), and so on,
// until a level has a single node: the root, the tree's id. A tree of at
// most maxFlatRanges ranges keeps the two-level form, one metarange
// listing all its ranges (the only form before levels existed, so small
// trees keep their ids). Either way the tree is a pure function of its
// entries, and trees that differ in a few paths share every other node:
// a commit that changes one path writes one range, one node a level and
// the root.

const (
	boundaryMask    = 63 // about 64 entries a range
	maxRangeEntries = 4096
	nodeBits        = 4 // about 16 children a node
	maxNodeRefs     = 256
	maxFlatRanges   = 128
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

// rangeRef names a range, or a node of a tree's upper levels, and the
// span of paths it covers.
type rangeRef struct {
	ID     string
	Min    string
	Max    string
	Count  int // entries
	Ranges int // ranges under a node (in version 2 records only)
}

type metaRange []rangeRef

// node is a decoded metarange record: level 1 lists ranges, level L > 1
// lists nodes of level L-1.
type node struct {
	level int
	refs  metaRange
}

func pathHash(path string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(path))
	return h.Sum64()
}

// isNodeBoundary reports whether a node of level ends after a child whose
// last path is path.
func isNodeBoundary(level int, path string) bool {
	shift := 6 + nodeBits*(level-1)
	if shift+nodeBits > 64 {
		return false
	}
	return pathHash(path)>>shift&(1<<nodeBits-1) == 0
}

func isBoundary(path string) bool {
	h := fnv.New64a()
	h.Write([]byte(path))
	return h.Sum64()&boundaryMask == 0
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// nodeOf encodes the node of level that lists refs, its children in
// path order, and returns the record and the ref a parent lists it by:
// its id, its span, and the entries and ranges under it. The tests'
// canonicalTree builds nodes by hand, to check this one.
func nodeOf(level int, refs metaRange) (rangeRef, []byte) {
	r := rangeRef{Min: refs[0].Min, Max: refs[len(refs)-1].Max}
	for _, c := range refs {
		r.Count += c.Count
		if level == 1 {
			r.Ranges++
		} else {
			r.Ranges += c.Ranges
		}
	}
	var data []byte
	if level == 1 {
		data = encodeMeta(refs)
	} else {
		data = encodeNode(level, refs)
	}
	r.ID = digestOf(data)
	return r, data
}

// emptyMetaRangeID is the id of the tree with no entries.
var emptyMetaRangeID = digestOf(encodeMeta(nil))

// treeCache holds decoded ranges and metarange records; both are
// immutable, so entries never go stale.
type treeCache struct {
	mu     sync.Mutex
	ranges map[string][]entry
	size   int
	metas  *bounded.Map[string, node]
	seen   *bounded.Map[string, struct{}] // metarange records and ranges a lookup read in place once
}

const (
	treeCacheEntries = 1 << 20 // total entries of ranges kept decoded
	treeCacheRecords = 4096    // metarange records kept decoded, and ids kept seen
)

func newTreeCache() *treeCache {
	return &treeCache{ranges: map[string][]entry{}, metas: bounded.NewMap[string, node](treeCacheRecords), seen: bounded.NewMap[string, struct{}](treeCacheRecords)}
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

// again reports whether a lookup read the metarange record or range id
// before without decoding it, and notes that one has now.
func (c *treeCache) again(id string) bool { return !c.seen.Add(id, struct{}{}) }

// trees reads and writes ranges and metarange records inside one
// transaction.
type trees struct {
	tx    *bolt.Tx
	cache *treeCache
}

// loadNode reads a metarange record: a tree's root or a node under it.
func (t trees) loadNode(id string) (node, error) {
	if id == emptyMetaRangeID {
		return node{level: 1}, nil
	}
	if m, ok := t.cache.metas.Get(id); ok {
		return m, nil
	}
	b := t.tx.Bucket(bucketMetaRanges).Get([]byte(id))
	if b == nil {
		return node{}, fmt.Errorf("%w: metarange %s is missing from the store", errCorruptMeta, id)
	}
	m, err := decodeNode(b)
	if err != nil {
		return node{}, fmt.Errorf("%w: metarange %s: %v", errCorruptMeta, id, err)
	}
	t.cache.metas.Put(id, m)
	return m, nil
}

// loadChild reads the node id that a node of level parent names.
func (t trees) loadChild(id string, parent int) (node, error) {
	n, err := t.loadNode(id)
	switch {
	case err != nil:
	case n.level != parent-1:
		err = fmt.Errorf("%w: metarange %s is of level %d, named as one of level %d", errCorruptMeta, id, n.level, parent-1)
	case len(n.refs) == 0:
		err = fmt.Errorf("%w: metarange %s is empty, named as a node of a tree", errCorruptMeta, id)
	}
	return n, err
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

// lookup finds path in the tree, or returns nil, reading one record a
// level: the root, the node under it whose span holds path, and so on
// down to a range. A record is decoded and cached the second time a
// lookup reads it; the first reads it in place (findChild, findEntry), so
// reading one file from each of many commits (a run's metrics, iteration
// by iteration) costs no decode of each tree.
func (t trees) lookup(metaID, path string) (*entry, error) {
	id, want := metaID, 0 // want: the level the parent names, 0 for the root
	var rangeID string
	for rangeID == "" {
		var child string
		level := 0
		if m, ok := t.cache.metas.Get(id); ok || id == emptyMetaRangeID || t.cache.again(id) {
			if !ok {
				var err error
				if m, err = t.loadNode(id); err != nil {
					return nil, err
				}
			}
			i := sort.Search(len(m.refs), func(i int) bool { return m.refs[i].Max >= path })
			if i == len(m.refs) || m.refs[i].Min > path {
				return nil, nil
			}
			child, level = m.refs[i].ID, m.level
		} else {
			b := t.tx.Bucket(bucketMetaRanges).Get([]byte(id))
			if b == nil {
				return nil, fmt.Errorf("%w: metarange %s is missing from the store", errCorruptMeta, id)
			}
			var err error
			if child, level, err = findChild(b, path); err != nil {
				return nil, fmt.Errorf("%w: metarange %s: %v", errCorruptMeta, id, err)
			}
			if child == "" {
				return nil, nil
			}
		}
		if want != 0 && level != want {
			return nil, fmt.Errorf("%w: metarange %s is of level %d, named as one of level %d", errCorruptMeta, id, level, want)
		}
		if level == 1 {
			rangeID = child
		}
		id, want = child, level-1
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

// builder writes a canonical tree from entries fed in path order, and
// from ranges and nodes of another tree reused whole. It keeps, for each
// level, the children waiting for the node that will list them; a child
// whose last path is a boundary of that level (or the maxNodeRefs-th)
// closes the node, whose ref then waits a level up.
type builder struct {
	t       trees
	pending []entry
	waiting []metaRange // waiting[L-1]: children of the next node of level L (ranges for L = 1)
	ranges  int         // ranges in the tree so far
	fresh   map[string]freshNode
}

// freshNode is a node this builder made, written by finish if the tree
// holds it (a tree of at most maxFlatRanges ranges holds none).
type freshNode struct {
	n    node
	data []byte
}

func newBuilder(t trees) *builder { return &builder{t: t, fresh: map[string]freshNode{}} }

func (b *builder) add(e entry) error {
	b.pending = append(b.pending, e)
	if isBoundary(e.Path) || len(b.pending) >= maxRangeEntries {
		return b.flush()
	}
	return nil
}

// emptyBelow reports whether nothing waits below level: a node of level-1
// (a range when level is 1) of another tree may then be reused whole.
func (b *builder) emptyBelow(level int) bool {
	if len(b.pending) > 0 {
		return false
	}
	for l := 1; l < level && l <= len(b.waiting); l++ {
		if len(b.waiting[l-1]) > 0 {
			return false
		}
	}
	return true
}

// reuse appends r, a range (level 1) or a node of level-1, unchanged;
// only valid when emptyBelow(level).
func (b *builder) reuse(level int, r rangeRef) {
	if level == 1 {
		b.ranges++
	} else {
		b.ranges += r.Ranges
	}
	b.push(level, r)
}

// push adds r to the children waiting at level, closing the node if r
// ends it.
func (b *builder) push(level int, r rangeRef) {
	for len(b.waiting) < level {
		b.waiting = append(b.waiting, nil)
	}
	b.waiting[level-1] = append(b.waiting[level-1], r)
	if isNodeBoundary(level, r.Max) || len(b.waiting[level-1]) >= maxNodeRefs {
		b.close(level)
	}
}

// close makes the node of level that lists the children waiting there,
// and pushes its ref a level up.
func (b *builder) close(level int) {
	refs := b.waiting[level-1]
	b.waiting[level-1] = nil
	r, data := nodeOf(level, refs)
	b.fresh[r.ID] = freshNode{n: node{level: level, refs: refs}, data: data}
	b.push(level+1, r)
}

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
	r := rangeRef{ID: id, Min: b.pending[0].Path, Max: b.pending[len(b.pending)-1].Path, Count: len(b.pending)}
	b.pending = nil
	b.ranges++
	b.push(1, r)
	return nil
}

func (b *builder) putMeta(id string, data []byte) error {
	bk := b.t.tx.Bucket(bucketMetaRanges)
	if bk.Get([]byte(id)) == nil {
		return bk.Put([]byte(id), data)
	}
	return nil
}

// write stores the nodes this builder made that the tree id holds.
func (b *builder) write(id string) error {
	f, ok := b.fresh[id]
	if !ok {
		return nil
	}
	delete(b.fresh, id)
	if err := b.putMeta(id, f.data); err != nil {
		return err
	}
	if f.n.level > 1 {
		for _, r := range f.n.refs {
			if err := b.write(r.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// node reads a node this builder made or one of the store.
func (b *builder) node(id string, parent int) (node, error) {
	if f, ok := b.fresh[id]; ok {
		return f.n, nil
	}
	return b.t.loadChild(id, parent)
}

// expand appends the ranges under r, a child of a node of level.
func (b *builder) expand(level int, r rangeRef, out *metaRange) error {
	if level == 1 {
		*out = append(*out, r)
		return nil
	}
	n, err := b.node(r.ID, level)
	if err != nil {
		return err
	}
	for _, c := range n.refs {
		if err := b.expand(level-1, c, out); err != nil {
			return err
		}
	}
	return nil
}

// finish closes the tree and returns its id: a metarange listing its
// ranges when there are at most maxFlatRanges, else the single node of
// the first level that has one.
func (b *builder) finish() (string, error) {
	if err := b.flush(); err != nil {
		return "", err
	}
	if b.ranges <= maxFlatRanges {
		var all metaRange
		for level := len(b.waiting); level >= 1; level-- { // higher levels hold earlier paths
			for _, r := range b.waiting[level-1] {
				if err := b.expand(level, r, &all); err != nil {
					return "", err
				}
			}
		}
		if len(all) == 0 {
			return emptyMetaRangeID, nil
		}
		data := encodeMeta(all)
		id := digestOf(data)
		return id, b.putMeta(id, data)
	}
	for level := 1; ; level++ {
		above := false
		for l := level + 1; l <= len(b.waiting); l++ {
			above = above || len(b.waiting[l-1]) > 0
		}
		w := b.waiting[level-1]
		switch {
		case !above && level > 1 && len(w) == 1:
			// A node with one child is no root: boundaries at the levels
			// above the first with a single node wrap it in nodes of one
			// child each; the root is the node they wrap.
			root, rl := w[0].ID, level-1
			for rl > 1 {
				n, err := b.node(root, rl+1)
				if err != nil {
					return "", err
				}
				if len(n.refs) != 1 {
					break
				}
				root, rl = n.refs[0].ID, rl-1
			}
			return root, b.write(root)
		case len(w) > 0:
			b.close(level)
		case !above:
			return "", fmt.Errorf("%w: building a tree found no root", errCorruptMeta)
		}
	}
}

// change sets (Entry != nil) or removes (Entry == nil) one path.
type change struct {
	Path  string
	Entry *entry
}

// apply returns the id of the tree base with changes (sorted by path, one
// per path) applied. Ranges and nodes no change falls into are reused as
// they are, without being read.
func (t trees) apply(baseID string, changes []change) (string, error) {
	base, err := t.loadNode(baseID)
	if err != nil {
		return "", err
	}
	b := newBuilder(t)
	rest, err := b.walk(base, changes, true)
	if err != nil {
		return "", err
	}
	if err := mergeInto(b, nil, rest); err != nil {
		return "", err
	}
	return b.finish()
}

// walk feeds b the subtree of n with the changes that fall into it
// applied, and returns the changes after it. The last child of the tree's
// last node of each level (last) takes every change after it, since it
// does not end at a boundary.
func (b *builder) walk(n node, chs []change, last bool) ([]change, error) {
	ci := 0
	for i, r := range n.refs {
		end := last && i == len(n.refs)-1
		j := ci
		for j < len(chs) && (end || chs[j].Path <= r.Max) {
			j++
		}
		if j == ci && b.emptyBelow(n.level) {
			b.reuse(n.level, r)
			continue
		}
		if n.level == 1 {
			es, err := b.t.loadRange(r.ID)
			if err != nil {
				return nil, err
			}
			if err := mergeInto(b, es, chs[ci:j]); err != nil {
				return nil, err
			}
		} else {
			c, err := b.t.loadChild(r.ID, n.level)
			if err != nil {
				return nil, err
			}
			if _, err := b.walk(c, chs[ci:j], end); err != nil {
				return nil, err
			}
		}
		ci = j
	}
	return chs[ci:], nil
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

// cursor walks a tree's entries in path order, reading nodes and ranges
// lazily so a caller can skip whole nodes and ranges by id.
type cursor struct {
	t     trees
	root  frame
	stack []frame // the root's children first; the last is the current level
	es    []entry // entries of the current range once entered
	ei    int
}

// frame is the children of one node and the cursor's place among them.
type frame struct {
	refs  metaRange
	level int // of the children: 0 for ranges
	i     int
}

func newCursor(t trees, metaID string) (*cursor, error) {
	n, err := t.loadNode(metaID)
	if err != nil {
		return nil, err
	}
	c := &cursor{t: t, root: frame{refs: n.refs, level: n.level - 1}}
	c.stack = []frame{c.root}
	c.settle()
	return c, nil
}

// settle leaves the frames whose children are all read.
func (c *cursor) settle() {
	for len(c.stack) > 0 {
		f := &c.stack[len(c.stack)-1]
		if f.i < len(f.refs) {
			return
		}
		c.stack = c.stack[:len(c.stack)-1]
		if len(c.stack) > 0 {
			c.stack[len(c.stack)-1].i++
		}
	}
}

func (c *cursor) done() bool { return len(c.stack) == 0 }

// atStart reports whether the cursor sits before the first entry of a
// range or node, nothing of it read: ref then names it.
func (c *cursor) atStart() bool { return !c.done() && c.es == nil }

// ref returns the range or node the cursor is at, and its level (0 for a
// range).
func (c *cursor) ref() (rangeRef, int) {
	f := &c.stack[len(c.stack)-1]
	return f.refs[f.i], f.level
}

// skip moves past the current range or node.
func (c *cursor) skip() {
	c.es, c.ei = nil, 0
	c.stack[len(c.stack)-1].i++
	c.settle()
}

// descend enters the current node (its first child becomes current) or
// range (its entries are read).
func (c *cursor) descend() error {
	r, level := c.ref()
	if level == 0 {
		es, err := c.t.loadRange(r.ID)
		if err != nil {
			return err
		}
		if len(es) == 0 {
			c.skip()
			return nil
		}
		c.es, c.ei = es, 0
		return nil
	}
	n, err := c.t.loadChild(r.ID, level+1)
	if err != nil {
		return err
	}
	c.stack = append(c.stack, frame{refs: n.refs, level: level - 1})
	c.settle()
	return nil
}

// seek moves to the first entry with path >= key.
func (c *cursor) seek(key string) error {
	c.stack = append(c.stack[:0], c.root)
	c.es, c.ei = nil, 0
	for {
		f := &c.stack[len(c.stack)-1]
		f.i = sort.Search(len(f.refs), func(i int) bool { return f.refs[i].Max >= key })
		if f.i == len(f.refs) {
			c.settle()
			return nil
		}
		ranges := f.level == 0
		if err := c.descend(); err != nil {
			return err
		}
		if ranges {
			if c.es != nil {
				c.ei = sort.Search(len(c.es), func(j int) bool { return c.es[j].Path >= key })
				if c.ei == len(c.es) {
					c.skip()
				}
			}
			return nil
		}
	}
}

// cur returns the current entry, or nil at the end.
func (c *cursor) cur() (*entry, error) {
	for !c.done() {
		if c.es != nil {
			return &c.es[c.ei], nil
		}
		if err := c.descend(); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func (c *cursor) next() {
	c.ei++
	if c.ei >= len(c.es) {
		c.skip()
	}
}

// treeDiff calls emit for every path whose entry differs between trees a
// and b (under prefix), in path order; left or right is nil when the path
// is absent on that side. Ranges and nodes with equal ids on both sides
// are skipped without being read.
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
		if a.atStart() && b.atStart() {
			ra, la := a.ref()
			rb, lb := b.ref()
			if ra.ID == rb.ID {
				a.skip()
				b.skip()
				continue
			}
			if la > 0 || lb > 0 {
				// Compare what starts here a level lower, on the side
				// (or sides) at the higher level.
				if la >= lb {
					if err := a.descend(); err != nil {
						return err
					}
				}
				if lb >= la {
					if err := b.descend(); err != nil {
						return err
					}
				}
				continue
			}
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

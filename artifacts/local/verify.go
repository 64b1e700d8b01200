package local

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"

	bolt "go.etcd.io/bbolt"

	"github.com/rlpipe/rlpipe/artifacts"
)

// Verify checks every commit, metarange (a tree's root and the chunks
// under it), range and blob that a branch, tag
// or staged change reaches: each must be present and match the digest it
// is named by (a commit's id is the digest of its content, a tree's the
// digest of its encoding, a blob's the SHA-256 of its bytes). The
// metadata is checked in one read transaction and the blobs after it, so
// that other processes are not locked out of the store while gigabytes
// are read.
func (s *Store) Verify(ctx context.Context, opts *artifacts.VerifyOptions) (artifacts.VerifyResult, error) {
	o := artifacts.ValueOf(opts)
	v := &verifier{seen: map[string]int{}, blobAt: map[string]int{}}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if err := v.walk(tx); err != nil {
			return err
		}
		v.inline(tx, o.Quick)
		return nil
	})
	if err != nil {
		return v.res, fmt.Errorf("verify %s: %w", s.root, err)
	}
	for i := range v.blobs {
		if err := ctx.Err(); err != nil {
			return v.res, fmt.Errorf("verify %s: %w", s.root, err)
		}
		if v.blobs[i].checked {
			continue
		}
		if err := s.checkBlob(&v.blobs[i], o.Quick, &v.res); err != nil {
			return v.res, fmt.Errorf("verify %s: %w", s.root, err)
		}
	}
	return v.res, nil
}

// verifier walks the metadata of a store and collects the blobs it uses.
type verifier struct {
	res artifacts.VerifyResult
	// seen maps "kind id" of each commit and tree checked to its index
	// in res.Damage, or -1 when it is sound.
	seen   map[string]int
	blobs  []blobUse
	blobAt map[string]int // digest → index in blobs
}

// blobUse is a blob to check, with its recorded size and the first place
// that uses it (a Damage waiting for a Problem).
type blobUse struct {
	size    int64
	at      artifacts.Damage
	checked bool   // inline: checked in the metadata transaction
	sums    []byte // a blob file's chunk CRCs, when recorded
}

func (v *verifier) walk(tx *bolt.Tx) error {
	type root struct{ ref, id string }
	var roots []root
	err := tx.Bucket(bucketBranches).ForEach(func(k, val []byte) error {
		var b artifacts.Branch
		if err := json.Unmarshal(val, &b); err != nil {
			return fmt.Errorf("branch %q: the record is unreadable (%v): recreate the branch", k, err)
		}
		roots = append(roots, root{string(k), b.CommitID})
		return nil
	})
	if err != nil {
		return err
	}
	err = tx.Bucket(bucketTags).ForEach(func(k, val []byte) error {
		roots = append(roots, root{string(k), string(val)})
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range roots {
		v.history(tx, r.ref, r.id)
	}
	return tx.Bucket(bucketStaging).ForEachBucket(func(branch []byte) error {
		return stagingOf(tx, string(branch)).ForEach(func(k, val []byte) error {
			var se staged
			if err := json.Unmarshal(val, &se); err != nil {
				v.res.Damage = append(v.res.Damage, artifacts.Damage{Kind: artifacts.DamageStaged, ID: string(k),
					Problem: fmt.Sprintf("the staged change is unreadable (%v); drop it with `rlpipe branch reset %s`", err, branch),
					Ref:     string(branch), Path: string(k), Uses: 1})
				return nil
			}
			if se.Entry != nil {
				v.use(*se.Entry, string(branch), "")
			}
			return nil
		})
	})
}

// again counts one more use of a commit or tree already checked, and
// reports whether it was checked before.
func (v *verifier) again(key string) bool {
	i, ok := v.seen[key]
	if ok && i >= 0 {
		v.res.Damage[i].Uses++
	}
	return ok
}

// damaged records d as the damage of the thing key names.
func (v *verifier) damaged(key string, d artifacts.Damage, problem string) {
	d.Problem, d.Uses = problem, 1
	v.seen[key] = len(v.res.Damage)
	v.res.Damage = append(v.res.Damage, d)
}

// history checks the commits reachable from head, as ref reaches them.
func (v *verifier) history(tx *bolt.Tx, ref, head string) {
	type step struct{ id, child string }
	stack := []step{{head, ""}}
	for len(stack) > 0 {
		st := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		key := "commit " + st.id
		if v.again(key) {
			continue
		}
		v.seen[key] = -1
		v.res.Commits++
		d := artifacts.Damage{Kind: artifacts.DamageCommit, ID: st.id, Ref: ref, Commit: st.child}
		raw := tx.Bucket(bucketCommits).Get([]byte(st.id))
		if raw == nil {
			v.damaged(key, d, "missing from the store; the history behind it is not checked")
			continue
		}
		var c artifacts.Commit
		if err := json.Unmarshal(raw, &c); err != nil {
			v.damaged(key, d, fmt.Sprintf("unreadable (%v); the history behind it is not checked", err))
			continue
		}
		if id, err := commitID(c); c.ID != st.id || err != nil || id != st.id {
			// Its parents and tree are still what it names: check them.
			v.damaged(key, d, "its content does not match its id")
		}
		v.tree(tx, ref, st.id, c.MetaRangeID)
		for _, p := range c.Parents {
			stack = append(stack, step{p, st.id})
		}
	}
}

// tree checks a commit's metarange, the nodes under it and its ranges.
func (v *verifier) tree(tx *bolt.Tx, ref, commit, id string) {
	if id == emptyMetaRangeID {
		return
	}
	d := artifacts.Damage{Kind: artifacts.DamageMetaRange, ID: id, Ref: ref, Commit: commit}
	v.node(tx, d, 0, "the commit's objects are not checked")
}

// node checks a metarange record, a root (parent 0) or a chunk under a
// node of level parent, and what it lists; d says where it is used and
// span what goes unchecked when it is damaged.
// treeBytes reads the tree node d names from bucket, once per key: it
// counts the node, and reports it damaged (false) when it is missing or
// its bytes do not hash to its id; span says what goes unchecked then.
func (v *verifier) treeBytes(tx *bolt.Tx, bucket []byte, key string, d artifacts.Damage, span string) ([]byte, bool) {
	if v.again(key) {
		return nil, false
	}
	v.seen[key] = -1
	v.res.Trees++
	raw := tx.Bucket(bucket).Get([]byte(d.ID))
	if raw == nil {
		v.damaged(key, d, "missing from the store; "+span)
		return nil, false
	}
	if digestOf(raw) != d.ID {
		v.damaged(key, d, "its content does not match its id; "+span)
		return nil, false
	}
	return raw, true
}

func (v *verifier) node(tx *bolt.Tx, d artifacts.Damage, parent int, span string) {
	key := "metarange " + d.ID
	raw, ok := v.treeBytes(tx, bucketMetaRanges, key, d, span)
	if !ok {
		return
	}
	n, err := decodeNode(raw)
	switch {
	case err != nil:
		v.damaged(key, d, fmt.Sprintf("unreadable (%v); %s", err, span))
		return
	case parent > 0 && n.level != parent-1:
		v.damaged(key, d, fmt.Sprintf("a node of level %d where one of level %d is named; %s", n.level, parent-1, span))
		return
	case parent > 0 && len(n.refs) == 0:
		v.damaged(key, d, "empty; "+span)
		return
	}
	for _, r := range n.refs {
		if n.level == 1 {
			v.rangeOf(tx, d.Ref, d.Commit, r)
			continue
		}
		cd := artifacts.Damage{Kind: artifacts.DamageChunk, ID: r.ID, Ref: d.Ref, Commit: d.Commit, Path: r.Min}
		v.node(tx, cd, n.level, fmt.Sprintf("the objects %s … %s are not checked", r.Min, r.Max))
	}
}

func (v *verifier) rangeOf(tx *bolt.Tx, ref, commit string, r rangeRef) {
	key := "range " + r.ID
	d := artifacts.Damage{Kind: artifacts.DamageRange, ID: r.ID, Ref: ref, Commit: commit, Path: r.Min}
	span := fmt.Sprintf("the objects %s … %s are not checked", r.Min, r.Max)
	raw, ok := v.treeBytes(tx, bucketRanges, key, d, span)
	if !ok {
		return
	}
	es, err := decodeEntries(raw)
	if err != nil {
		v.damaged(key, d, fmt.Sprintf("unreadable (%v); %s", err, span))
		return
	}
	for _, e := range es {
		v.use(e, ref, commit)
	}
}

// use notes that ref (through commit, or staged when commit is "") uses
// the blob of e.
func (v *verifier) use(e entry, ref, commit string) {
	if i, ok := v.blobAt[e.Digest]; ok {
		v.blobs[i].at.Uses++
		return
	}
	v.blobAt[e.Digest] = len(v.blobs)
	v.blobs = append(v.blobs, blobUse{size: e.Size, at: artifacts.Damage{Kind: artifacts.DamageBlob, ID: e.Digest, Ref: ref, Commit: commit, Path: e.Path, Uses: 1}})
}

// inline checks, in the metadata transaction, the blobs whose bytes are
// inline in meta.db (their digest is always checked: they are small).
func (v *verifier) inline(tx *bolt.Tx, quick bool) {
	for i := range v.blobs {
		b := &v.blobs[i]
		raw := getInline(tx, b.at.ID, b.size)
		if raw == nil {
			b.sums = getChunkSums(tx, b.at.ID, b.size)
			continue
		}
		b.checked = true
		v.res.Objects++
		d := b.at
		switch {
		case int64(len(raw)) != b.size:
			d.Problem = fmt.Sprintf("holds %d bytes, recorded as %d (inline in meta.db)", len(raw), b.size)
		case digestHex(raw) != d.ID:
			d.Problem = "its content does not match its digest (it reads back as " + digestHex(raw) + ", inline in meta.db)"
		}
		if !quick {
			v.res.Bytes += int64(len(raw))
		}
		if d.Problem != "" {
			v.res.Damage = append(v.res.Damage, d)
		}
	}
}

// checkBlob checks one blob's presence and size and, unless quick, its
// digest. Damage goes to res; the error is for a read that failed for
// another reason.
func (s *Store) checkBlob(b *blobUse, quick bool, res *artifacts.VerifyResult) error {
	res.Objects++
	d := b.at
	if !validDigest(d.ID) {
		d.Problem = "the tree names no valid SHA-256 digest"
		res.Damage = append(res.Damage, d)
		return nil
	}
	f, err := os.Open(s.blobs.path(d.ID))
	if errors.Is(err, fs.ErrNotExist) {
		d.Problem = "missing from the store"
		res.Damage = append(res.Damage, d)
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	switch {
	case fi.Size() != b.size:
		d.Problem = fmt.Sprintf("holds %d bytes, recorded as %d", fi.Size(), b.size)
	case !quick:
		h := sha256.New()
		c := &chunkChecker{sums: b.sums, bad: -1}
		n, err := io.Copy(io.MultiWriter(h, c), f)
		res.Bytes += n
		c.flush()
		if err != nil {
			return fmt.Errorf("read blob %s: %w", d.ID, err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != d.ID {
			d.Problem = "its content does not match its digest (it reads back as " + got + ")"
		} else if c.bad >= 0 {
			d.Problem = fmt.Sprintf("its bytes match their digest but not the checksum of chunk %d recorded in meta.db, so reads of it fail (write the same bytes to any path again to record its checksums anew)", c.bad)
		}
	}
	if d.Problem != "" {
		res.Damage = append(res.Damage, d)
	}
	return nil
}

func validDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// chunkChecker compares the bytes written to it, chunk by chunk, with
// recorded chunk CRCs (none: nothing to compare) and notes the first
// chunk that differs in bad.
type chunkChecker struct {
	sums  []byte
	crc   uint32
	fill  int // bytes of the current chunk so far
	chunk int
	bad   int
}

func (c *chunkChecker) Write(p []byte) (int, error) {
	n := len(p)
	for c.sums != nil && len(p) > 0 {
		k := min(len(p), chunkSize-c.fill)
		c.crc = crc32.Update(c.crc, castagnoli, p[:k])
		c.fill += k
		p = p[k:]
		if c.fill == chunkSize {
			c.flush()
		}
	}
	return n, nil
}

// flush compares the chunk written so far, if any.
func (c *chunkChecker) flush() {
	if c.sums == nil || c.fill == 0 {
		return
	}
	if c.bad < 0 && (4*c.chunk+4 > len(c.sums) || binary.BigEndian.Uint32(c.sums[4*c.chunk:]) != c.crc) {
		c.bad = c.chunk
	}
	c.chunk++
	c.crc, c.fill = 0, 0
}

package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"iter"
	"os"
	"runtime"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sync/errgroup"

	"github.com/rlpipe/rlpipe/artifacts"
)

// staged is a branch's uncommitted change to one path.
type staged struct {
	Tombstone bool   `json:"x,omitempty"`
	Entry     *entry `json:"e,omitempty"`
}

const listPageSize = 1000

// writableBranch checks that ref names a branch and says why not otherwise.
func writableBranch(tx *bolt.Tx, ref string) error {
	if _, err := getBranch(tx, ref); err == nil {
		return nil
	}
	if _, err := resolve(tx, ref); err == nil {
		return fmt.Errorf("%w: %q is a tag or commit; write to a branch (`rlpipe branch create NAME --from %s`)", artifacts.ErrReadOnlyRef, ref, ref)
	}
	return fmt.Errorf("branch %q: %w", ref, artifacts.ErrBranchNotFound)
}

func stagingOf(tx *bolt.Tx, branch string) *bolt.Bucket {
	return tx.Bucket(bucketStaging).Bucket([]byte(branch))
}

// lookupOnBranch is lookupIn on a branch that writableBranch accepted
// (its head commit with its staged changes); it returns the head too.
func (s *Store) lookupOnBranch(tx *bolt.Tx, branch, path string) (artifacts.Commit, *entry, error) {
	c, err := branchHead(tx, branch)
	if err != nil {
		return c, nil, err
	}
	e, err := s.lookupIn(tx, view{commit: c, branch: branch}, path)
	return c, e, err
}

// lookupIn finds path as seen through v (staged changes first).

func (s *Store) lookupIn(tx *bolt.Tx, v view, path string) (*entry, error) {
	if v.branch != "" {
		if st := stagingOf(tx, v.branch); st != nil {
			var se staged
			ok, err := getJSON(st, []byte(path), &se)
			if err != nil {
				return nil, err
			}
			if ok {
				return se.Entry, nil // nil for a tombstone
			}
		}
	}
	return s.trees(tx).lookup(v.commit.MetaRangeID, path)
}

func info(e *entry) artifacts.ObjectInfo {
	return artifacts.ObjectInfo{Path: e.Path, Size: e.Size, Checksum: e.Digest, Mtime: time.Unix(0, e.Mtime).UTC(), ContentType: e.ContentType, Metadata: e.Metadata}
}

// PutObject streams r into the blob store and stages it on branch.
func (s *Store) PutObject(ctx context.Context, branch, path string, r io.Reader, opts *artifacts.PutOptions) (artifacts.ObjectInfo, error) {
	p, err := s.preparePut(ctx, branch, path, r, opts)
	if err != nil {
		return artifacts.ObjectInfo{}, err
	}
	err = s.batch(ctx, func(tx *bolt.Tx) error {
		if err := writableBranch(tx, branch); err != nil {
			return err
		}
		return s.stagePut(tx, branch, p)
	})
	if err != nil {
		return artifacts.ObjectInfo{}, fmt.Errorf("put %s:%s: %w", branch, path, err)
	}
	return info(p.e), nil
}

// PutObjects stages every object of puts on branch in one transaction,
// after writing the blobs of the large ones, as many at a time as there
// are cores: one sync for all of their records.
func (s *Store) PutObjects(ctx context.Context, branch string, puts []artifacts.Put) ([]artifacts.ObjectInfo, error) {
	// The bodies are read and hashed side by side, one per core: hashing
	// is what bounds a put of large files, and a weights directory is
	// several of them.
	ps := make([]prepared, len(puts))
	errs := make([]error, len(puts))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, pu := range puts {
		g.Go(func() error {
			ps[i], errs[i] = s.preparePut(gctx, branch, pu.Path, pu.Body, pu.Options)
			return errs[i]
		})
	}
	if err := g.Wait(); err != nil {
		// The first put in order that failed of itself, not because
		// another's failure cancelled it.
		for _, e := range errs {
			if e != nil && (ctx.Err() != nil || !errors.Is(e, context.Canceled)) {
				return nil, e
			}
		}
		return nil, err
	}
	err := s.batch(ctx, func(tx *bolt.Tx) error {
		if err := writableBranch(tx, branch); err != nil {
			return err
		}
		for _, p := range ps {
			if err := s.stagePut(tx, branch, p); err != nil {
				return fmt.Errorf("%s: %w", p.e.Path, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("put %d objects on %s: %w", len(puts), branch, err)
	}
	out := make([]artifacts.ObjectInfo, len(ps))
	for i, p := range ps {
		out[i] = info(p.e)
	}
	return out, nil
}

// prepared is an object ready to stage: its entry, and its bytes when
// they ride the staging transaction.
type prepared struct {
	e        *entry
	head     []byte // the bytes, when inline
	sums     []byte // the chunk CRCs of a blob file
	inline   bool
	ifAbsent bool
}

// preparePut reads an object: an object of at most inlineMax bytes
// rides the staging transaction (inline.go); a larger one is streamed
// to a blob file first.
func (s *Store) preparePut(ctx context.Context, branch, path string, r io.Reader, opts *artifacts.PutOptions) (prepared, error) {
	if opts == nil {
		opts = &artifacts.PutOptions{}
	}
	if err := artifacts.ValidatePath(path); err != nil {
		return prepared{}, fmt.Errorf("put %s:%s: %w", branch, path, err)
	}
	if f, off, size, ok := regularFile(r); ok && size > inlineMax {
		// putStored checks that the branch takes writes, once for both.
		w, stored, err := s.putStored(ctx, branch, f, off, size)
		if err == nil && !stored {
			w, err = s.blobs.putFile(ctx, f)
		}
		if err != nil {
			return prepared{}, fmt.Errorf("put %s:%s: %w", branch, path, err)
		}
		return newPrepared(path, w, nil, false, opts), nil
	}
	head, err := io.ReadAll(io.LimitReader(r, inlineMax+1))
	if err != nil {
		return prepared{}, fmt.Errorf("put %s:%s: read: %w", branch, path, err)
	}
	var (
		w      = written{size: int64(len(head))}
		inline = w.size <= inlineMax
	)
	if inline {
		w.digest = digestHex(head)
	} else {
		if err := s.view(ctx, func(tx *bolt.Tx) error { return writableBranch(tx, branch) }); err != nil {
			return prepared{}, fmt.Errorf("put %s:%s: %w", branch, path, err)
		}
		w, err = s.blobs.put(ctx, io.MultiReader(bytes.NewReader(head), r))
		if err != nil {
			return prepared{}, fmt.Errorf("put %s:%s: %w", branch, path, err)
		}
	}
	return newPrepared(path, w, head, inline, opts), nil
}

func newPrepared(path string, w written, head []byte, inline bool, opts *artifacts.PutOptions) prepared {
	e := &entry{Path: path, Digest: w.digest, Size: w.size, Mtime: time.Now().UnixNano(), ContentType: opts.ContentType}
	if len(opts.Metadata) > 0 {
		e.Metadata = make(map[string]string, len(opts.Metadata))
		for k, v := range opts.Metadata {
			e.Metadata[strings.ToLower(k)] = v
		}
	}
	return prepared{e: e, head: head, sums: w.sums, inline: inline, ifAbsent: opts.IfAbsent}
}

// putStored is the shortcut for an unchanged file, such as a shard of a
// weights directory that training did not change: when the size bytes
// of the regular file f from off, and their first chunk's CRC, match a
// blob's recorded before (bucket firstchunks), it hashes them without
// writing them and, when the digest names a stored blob, returns that
// blob (ok). Otherwise f is left where it was for putFile to copy: a
// file that matched on its first chunk only is hashed twice, once here
// and once as it is copied. It fails on a branch that takes no writes.
func (s *Store) putStored(ctx context.Context, branch string, f *os.File, off, size int64) (written, bool, error) {
	buf := chunkBuffer()
	n, _ := f.ReadAt(buf[:min(chunkSize, size)], off)
	key := firstChunkKey(size, crc32.Checksum(buf[:n], castagnoli))
	putChunkBuffer(buf)
	var candidate bool
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if err := writableBranch(tx, branch); err != nil {
			return err
		}
		b := tx.Bucket(bucketFirstChunks)
		candidate = b != nil && b.Get(key) != nil
		return nil
	})
	if err != nil || !candidate {
		return written{}, false, err
	}
	w, ok, err := s.blobs.stored(ctx, io.NewSectionReader(f, off, size))
	if err != nil || !ok {
		return written{}, false, err
	}
	_, err = f.Seek(off+w.size, io.SeekStart)
	return w, err == nil, err
}

// regularFile returns r as a regular file, its current offset and the
// bytes from there to its end, or false when r is something else.
func regularFile(r io.Reader) (f *os.File, off, size int64, ok bool) {
	f, ok = r.(*os.File)
	if !ok {
		return nil, 0, 0, false
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, 0, 0, false
	}
	if off, err = f.Seek(0, io.SeekCurrent); err != nil {
		return nil, 0, 0, false
	}
	return f, off, fi.Size() - off, true
}

// stagePut records p on branch, its bytes with it when inline.
func (s *Store) stagePut(tx *bolt.Tx, branch string, p prepared) error {
	if p.ifAbsent {
		_, old, err := s.lookupOnBranch(tx, branch, p.e.Path)
		if err != nil {
			return err
		}
		if old != nil {
			return fmt.Errorf("%w: %s:%s", artifacts.ErrObjectExists, branch, p.e.Path)
		}
	}
	if p.inline {
		if err := putInline(tx, p.e.Digest, p.head); err != nil {
			return err
		}
	} else if err := putChunkSums(tx, p.e.Digest, p.e.Size, p.sums); err != nil {
		return err
	}
	st, err := tx.Bucket(bucketStaging).CreateBucketIfNotExists([]byte(branch))
	if err != nil {
		return err
	}
	return putJSON(st, []byte(p.e.Path), staged{Entry: p.e})
}

func (s *Store) stat(ctx context.Context, ref, path string) (*entry, error) {
	e, _, _, err := s.lookupData(ctx, ref, path, false)
	return e, err
}

// lookupData finds ref:path and, when withData is set, returns the
// object's bytes checked against its digest when they are inline, or the
// chunk CRCs of its blob file when recorded (nil otherwise), all in one
// read transaction.
func (s *Store) lookupData(ctx context.Context, ref, path string, withData bool) (e *entry, data, sums []byte, err error) {
	err = s.view(ctx, func(tx *bolt.Tx) error {
		v, err := s.resolveHead(tx, ref)
		if err != nil {
			return err
		}
		if e, err = s.lookupIn(tx, v, path); err != nil || e == nil || !withData {
			return err
		}
		if raw := getInline(tx, e.Digest, e.Size); raw != nil {
			data, err = checkInline(raw, e.Digest, e.Size, ref+":"+path)
		} else {
			sums = getChunkSums(tx, e.Digest, e.Size)
		}
		return err
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("stat %s:%s: %w", ref, path, err)
	}
	if e == nil {
		return nil, nil, nil, fmt.Errorf("%s:%s: %w", ref, path, artifacts.ErrObjectNotFound)
	}
	return e, data, sums, nil
}

// StatObject describes an object.
func (s *Store) StatObject(ctx context.Context, ref, path string) (artifacts.ObjectInfo, error) {
	e, err := s.stat(ctx, ref, path)
	if err != nil {
		return artifacts.ObjectInfo{}, err
	}
	return info(e), nil
}

// GetObject opens an object; the bytes are checked against its digest.
func (s *Store) GetObject(ctx context.Context, ref, path string) (io.ReadCloser, artifacts.ObjectInfo, error) {
	e, data, sums, err := s.lookupData(ctx, ref, path, true)
	if err != nil {
		return nil, artifacts.ObjectInfo{}, err
	}
	if data != nil {
		return io.NopCloser(bytes.NewReader(data)), info(e), nil
	}
	rc, err := s.blobs.open(ctx, e.Digest, e.Size, sums, ref+":"+path)
	if err != nil {
		return nil, artifacts.ObjectInfo{}, err
	}
	return rc, info(e), nil
}

// CopyObject stages dstBranch:dstPath pointing at the same blob as
// srcRef:srcPath; no bytes are copied.
func (s *Store) CopyObject(ctx context.Context, srcRef, srcPath, dstBranch, dstPath string) (artifacts.ObjectInfo, error) {
	if err := artifacts.ValidatePath(dstPath); err != nil {
		return artifacts.ObjectInfo{}, fmt.Errorf("copy to %s:%s: %w", dstBranch, dstPath, err)
	}
	var c copied
	err := s.batch(ctx, func(tx *bolt.Tx) error {
		if err := writableBranch(tx, dstBranch); err != nil {
			return err
		}
		v, err := resolve(tx, srcRef)
		if err != nil {
			return err
		}
		c, err = s.copyIn(tx, v, srcRef, srcPath, dstBranch, dstPath)
		return err
	})
	if err != nil {
		return artifacts.ObjectInfo{}, fmt.Errorf("copy %s:%s to %s:%s: %w", srcRef, srcPath, dstBranch, dstPath, err)
	}
	s.touch(c)
	return info(&c.e), nil
}

// CopyObjects stages every srcRef:p at dstBranch:p in one transaction:
// one sync for all of them.
func (s *Store) CopyObjects(ctx context.Context, srcRef, dstBranch string, paths []string) ([]artifacts.ObjectInfo, error) {
	for _, p := range paths {
		if err := artifacts.ValidatePath(p); err != nil {
			return nil, fmt.Errorf("copy to %s:%s: %w", dstBranch, p, err)
		}
	}
	var cs []copied
	err := s.batch(ctx, func(tx *bolt.Tx) error {
		cs = cs[:0] // a batch may run fn again
		if err := writableBranch(tx, dstBranch); err != nil {
			return err
		}
		v, err := resolve(tx, srcRef)
		if err != nil {
			return err
		}
		for _, p := range paths {
			c, err := s.copyIn(tx, v, srcRef, p, dstBranch, p)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			cs = append(cs, c)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("copy %d objects of %s to %s: %w", len(paths), srcRef, dstBranch, err)
	}
	out := make([]artifacts.ObjectInfo, len(cs))
	for i := range cs {
		s.touch(cs[i])
		out[i] = info(&cs[i].e)
	}
	return out, nil
}

// copied is an entry copyIn staged, and whether its bytes are inline.
type copied struct {
	e      entry
	inline bool
}

// copyIn stages at dstBranch:dstPath the entry srcPath has in v.
func (s *Store) copyIn(tx *bolt.Tx, v view, srcRef, srcPath, dstBranch, dstPath string) (copied, error) {
	src, err := s.lookupIn(tx, v, srcPath)
	if err != nil {
		return copied{}, err
	}
	if src == nil {
		return copied{}, fmt.Errorf("%s:%s: %w", srcRef, srcPath, artifacts.ErrObjectNotFound)
	}
	c := copied{e: *src, inline: getInline(tx, src.Digest, src.Size) != nil}
	c.e.Path = dstPath
	c.e.Mtime = time.Now().UnixNano()
	st, err := tx.Bucket(bucketStaging).CreateBucketIfNotExists([]byte(dstBranch))
	if err != nil {
		return copied{}, err
	}
	return c, putJSON(st, []byte(dstPath), staged{Entry: &c.e})
}

// touch keeps a copied blob file past a collection that started before
// the copy; inline bytes are marked live by the entry just staged.
func (s *Store) touch(c copied) {
	if !c.inline {
		now := time.Now()
		_ = os.Chtimes(s.blobs.path(c.e.Digest), now, now)
	}
}

// GetObjectRange reads part of an object, unverified.
func (s *Store) GetObjectRange(ctx context.Context, ref, path string, offset, length int64) (io.ReadCloser, error) {
	e, data, _, err := s.lookupData(ctx, ref, path, true)
	if err != nil {
		return nil, err
	}
	if offset < 0 || offset > e.Size {
		return nil, fmt.Errorf("%w: read %s:%s: offset %d outside 0..%d", artifacts.ErrInvalid, ref, path, offset, e.Size)
	}
	if data != nil {
		end := e.Size
		if length >= 0 && offset+length < end {
			end = offset + length
		}
		return io.NopCloser(bytes.NewReader(data[offset:end])), nil
	}
	return s.blobs.openRange(e.Digest, offset, length, ref+":"+path)
}

// DeleteObject stages the removal of path on branch.
func (s *Store) DeleteObject(ctx context.Context, branch, path string) error {
	err := s.batch(ctx, func(tx *bolt.Tx) error {
		if err := writableBranch(tx, branch); err != nil {
			return err
		}
		c, cur, err := s.lookupOnBranch(tx, branch, path)
		if err != nil {
			return err
		}
		if cur == nil {
			return artifacts.ErrObjectNotFound
		}
		committed, err := s.trees(tx).lookup(c.MetaRangeID, path)
		if err != nil {
			return err
		}
		st, err := tx.Bucket(bucketStaging).CreateBucketIfNotExists([]byte(branch))
		if err != nil {
			return err
		}
		if committed == nil {
			return st.Delete([]byte(path))
		}
		return putJSON(st, []byte(path), staged{Tombstone: true})
	})
	if err != nil {
		return fmt.Errorf("delete %s:%s: %w", branch, path, err)
	}
	return nil
}

// ListObjects lists objects under a prefix, folding on a delimiter.
func (s *Store) ListObjects(ctx context.Context, ref string, opts *artifacts.ListOptions) iter.Seq2[artifacts.Entry, error] {
	o := artifacts.ValueOf(opts)
	return func(yield func(artifacts.Entry, error) bool) {
		v, err := viewGet(s, ctx, func(tx *bolt.Tx) (view, error) { return resolve(tx, ref) })
		if err != nil {
			yield(artifacts.Entry{}, fmt.Errorf("list %s:%s: %w", ref, o.Prefix, err))
			return
		}
		from := o.Prefix
		if o.After != "" && o.After >= from {
			from = o.After + "\x00"
		}
		emitted := 0
		lastCP := ""
		for {
			page, err := viewGet(s, ctx, func(tx *bolt.Tx) ([]entry, error) {
				return s.listPage(tx, v, o.Prefix, from, listPageSize)
			})
			if err != nil {
				yield(artifacts.Entry{}, fmt.Errorf("list %s:%s: %w", ref, o.Prefix, err))
				return
			}
			for i := range page {
				e := &page[i]
				if lastCP != "" && strings.HasPrefix(e.Path, lastCP) {
					continue
				}
				out := artifacts.Entry{ObjectInfo: info(e)}
				if o.Delimiter != "" {
					if j := strings.Index(e.Path[len(o.Prefix):], o.Delimiter); j >= 0 {
						lastCP = e.Path[:len(o.Prefix)+j+len(o.Delimiter)]
						if lastCP <= o.After {
							continue
						}
						out = artifacts.Entry{ObjectInfo: artifacts.ObjectInfo{Path: lastCP}, CommonPrefix: true}
					}
				}
				if !yield(out, nil) {
					return
				}
				emitted++
				if o.Limit > 0 && emitted >= o.Limit {
					return
				}
			}
			if len(page) < listPageSize {
				return
			}
			last := page[len(page)-1].Path
			from = last + "\x00"
			if lastCP != "" && strings.HasPrefix(last, lastCP) {
				from = successor(lastCP)
			}
		}
	}
}

// successor returns the smallest string greater than every string with prefix p.
func successor(p string) string {
	b := []byte(p)
	for len(b) > 0 && b[len(b)-1] == 0xff {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return "\xff\xff\xff\xff"
	}
	b[len(b)-1]++
	return string(b)
}

// listPage returns up to n entries visible in v with path >= from under prefix.
func (s *Store) listPage(tx *bolt.Tx, v view, prefix, from string, n int) ([]entry, error) {
	cur, err := newCursor(s.trees(tx), v.commit.MetaRangeID)
	if err != nil {
		return nil, err
	}
	if err := cur.seek(from); err != nil {
		return nil, err
	}
	var sc *bolt.Cursor
	var sk, sv []byte
	if v.branch != "" {
		if st := stagingOf(tx, v.branch); st != nil {
			sc = st.Cursor()
			sk, sv = sc.Seek([]byte(from))
		}
	}
	var out []entry
	for len(out) < n {
		ce, err := cur.cur()
		if err != nil {
			return nil, err
		}
		if ce != nil && !strings.HasPrefix(ce.Path, prefix) {
			ce = nil
		}
		if sk != nil && !strings.HasPrefix(string(sk), prefix) {
			sk = nil
		}
		switch {
		case ce == nil && sk == nil:
			return out, nil
		case sk == nil || (ce != nil && ce.Path < string(sk)):
			out = append(out, *ce)
			cur.next()
		default:
			if ce != nil && ce.Path == string(sk) {
				cur.next()
			}
			var se staged
			if err := json.Unmarshal(sv, &se); err != nil {
				return nil, err
			}
			if se.Entry != nil {
				out = append(out, *se.Entry)
			}
			sk, sv = sc.Next()
		}
	}
	return out, nil
}

// stagedChanges returns a branch's staged changes in path order.
func stagedChanges(tx *bolt.Tx, branch, prefix string) ([]change, error) {
	st := stagingOf(tx, branch)
	if st == nil {
		return nil, nil
	}
	var out []change
	c := st.Cursor()
	for k, v := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, v = c.Next() {
		var se staged
		if err := json.Unmarshal(v, &se); err != nil {
			return nil, fmt.Errorf("staged %s: %w", k, err)
		}
		out = append(out, change{Path: string(k), Entry: se.Entry})
	}
	return out, nil
}

// DiffUncommitted lists a branch's staged changes against its head.
func (s *Store) DiffUncommitted(ctx context.Context, branch string) iter.Seq2[artifacts.Change, error] {
	return func(yield func(artifacts.Change, error) bool) {
		var out []artifacts.Change
		err := s.view(ctx, func(tx *bolt.Tx) error {
			c, err := branchHead(tx, branch)
			if err != nil {
				return err
			}
			chs, err := stagedChanges(tx, branch, "")
			if err != nil {
				return err
			}
			t := s.trees(tx)
			for _, ch := range chs {
				old, err := t.lookup(c.MetaRangeID, ch.Path)
				if err != nil {
					return err
				}
				if d, ok := describe(ch.Path, old, ch.Entry); ok {
					out = append(out, d)
				}
			}
			return nil
		})
		if err != nil {
			err = fmt.Errorf("diff uncommitted %s: %w", branch, err)
		}
		yieldAll(yield, out, err)
	}
}

// describe turns an old/new pair into a Change; ok is false if equal.
func describe(path string, old, new *entry) (artifacts.Change, bool) {
	switch {
	case old == nil && new == nil:
		return artifacts.Change{}, false
	case old == nil:
		return artifacts.Change{Type: artifacts.ChangeAdded, Path: path, Size: new.Size}, true
	case new == nil:
		return artifacts.Change{Type: artifacts.ChangeRemoved, Path: path, Size: old.Size}, true
	case old.sameContent(new):
		return artifacts.Change{}, false
	default:
		return artifacts.Change{Type: artifacts.ChangeModified, Path: path, Size: new.Size}, true
	}
}

// ResetBranch discards staged changes under prefix.
func (s *Store) ResetBranch(ctx context.Context, name, prefix string) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		if _, err := getBranch(tx, name); err != nil {
			return fmt.Errorf("reset branch: %w", err)
		}
		st := stagingOf(tx, name)
		if st == nil {
			return nil
		}
		if prefix == "" {
			return tx.Bucket(bucketStaging).DeleteBucket([]byte(name))
		}
		c := st.Cursor()
		for k, _ := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, _ = c.Seek([]byte(prefix)) {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}

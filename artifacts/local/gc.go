package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rlpipe/rlpipe/artifacts"
)

const defaultGracePeriod = time.Hour

// GC removes commits that no branch or tag reaches, the metarange records
// (roots and the nodes under them) and ranges only they used, and blobs that no remaining commit or staged change references.
// Blob files younger than the grace period are kept, so a collection
// never races an upload that has not been staged yet; inline bytes are
// staged in the transaction that writes them, so they need no grace. A store whose commits or
// trees are damaged, or whose blobs are missing or of the wrong size, is
// refused with an *artifacts.DamagedError (see Verify).
func (s *Store) GC(ctx context.Context, opts *artifacts.GCOptions) (artifacts.GCResult, error) {
	o := artifacts.ValueOf(opts)
	grace := o.GracePeriod
	if grace == 0 {
		grace = defaultGracePeriod
	}
	var res artifacts.GCResult
	// A damaged tree could hide the blobs it names from the mark below,
	// and the sweep would then delete them: refuse until it is repaired.
	check, err := s.Verify(ctx, &artifacts.VerifyOptions{Quick: true})
	if err != nil {
		return res, fmt.Errorf("gc %s: %w", s.root, err)
	}
	if len(check.Damage) > 0 {
		return res, &artifacts.DamagedError{Op: "gc " + s.root, Damage: check.Damage}
	}
	live := map[string]bool{} // blob digests still referenced
	// Metadata is marked and swept in one transaction; blobs after it,
	// guarded by the grace period.
	err = s.update(ctx, func(tx *bolt.Tx) error {
		var roots []string
		if err := tx.Bucket(bucketBranches).ForEach(func(_, v []byte) error {
			var b artifacts.Branch
			if err := json.Unmarshal(v, &b); err != nil {
				return err
			}
			roots = append(roots, b.CommitID)
			return nil
		}); err != nil {
			return err
		}
		if err := tx.Bucket(bucketTags).ForEach(func(_, v []byte) error {
			roots = append(roots, string(v))
			return nil
		}); err != nil {
			return err
		}
		reachable, err := reachableFrom(tx, roots)
		if err != nil {
			return err
		}
		liveMeta, liveRanges := map[string]bool{}, map[string]bool{}
		t := s.trees(tx)
		// mark notes a metarange record (a root, or a node under one) and
		// what it reaches as live; a node shared with a tree marked before
		// is not read again.
		var mark func(id string, parent int) error
		mark = func(id string, parent int) error {
			if liveMeta[id] {
				return nil
			}
			liveMeta[id] = true
			var n node
			var err error
			if parent == 0 {
				n, err = t.loadNode(id)
			} else {
				n, err = t.loadChild(id, parent)
			}
			if err != nil {
				return err
			}
			for _, r := range n.refs {
				if n.level > 1 {
					if err := mark(r.ID, n.level); err != nil {
						return err
					}
					continue
				}
				if liveRanges[r.ID] {
					continue
				}
				liveRanges[r.ID] = true
				es, err := t.loadRange(r.ID)
				if err != nil {
					return err
				}
				for _, e := range es {
					live[e.Digest] = true
				}
			}
			return nil
		}
		for id := range reachable {
			c, _ := getCommit(tx, id)
			if err := mark(c.MetaRangeID, 0); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketStaging).ForEachBucket(func(k []byte) error {
			chs, err := stagedChanges(tx, string(k), "")
			if err != nil {
				return err
			}
			for _, ch := range chs {
				if ch.Entry != nil {
					live[ch.Entry.Digest] = true
				}
			}
			return nil
		}); err != nil {
			return err
		}
		sweep := func(bucket []byte, keep map[string]bool, count *int) error {
			var dead [][]byte
			if err := tx.Bucket(bucket).ForEach(func(k, _ []byte) error {
				if !keep[string(k)] {
					dead = append(dead, append([]byte(nil), k...))
				}
				return nil
			}); err != nil {
				return err
			}
			if count != nil {
				*count = len(dead)
			}
			if o.DryRun {
				return nil
			}
			for _, k := range dead {
				if err := tx.Bucket(bucket).Delete(k); err != nil {
					return err
				}
			}
			return nil
		}
		if err := sweep(bucketCommits, reachable, &res.CommitsRemoved); err != nil {
			return err
		}
		if err := sweep(bucketMetaRanges, liveMeta, nil); err != nil {
			return err
		}
		if err := sweep(bucketRanges, liveRanges, nil); err != nil {
			return err
		}
		if tx.Bucket(bucketChunkSums) != nil {
			if err := sweep(bucketChunkSums, live, nil); err != nil {
				return err
			}
		}
		if err := sweepFirstChunks(tx, live, o.DryRun); err != nil {
			return err
		}
		return sweepInline(tx, live, o.DryRun, &res)
	})
	if err != nil {
		return res, fmt.Errorf("gc %s: %w", s.root, err)
	}
	cutoff := time.Now().Add(-grace)
	if grace < 0 {
		cutoff = time.Now().Add(time.Hour) // everything is old enough
	}
	err = filepath.WalkDir(s.blobs.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if live[d.Name()] || fi.ModTime().After(cutoff) {
			res.BlobsKept++
			return nil
		}
		res.BlobsRemoved++
		res.BytesRemoved += fi.Size()
		if o.DryRun {
			return nil
		}
		return os.Remove(path)
	})
	if err != nil {
		return res, fmt.Errorf("gc %s: sweep blobs: %w", s.root, err)
	}
	// Uploads interrupted by a crash leave temporary files behind.
	tmps, _ := os.ReadDir(s.blobs.tmp)
	for _, d := range tmps {
		if fi, err := d.Info(); err == nil && fi.ModTime().Before(cutoff) && !o.DryRun {
			os.Remove(filepath.Join(s.blobs.tmp, d.Name()))
		}
	}
	return res, nil
}

// sweepInline removes the inline bytes that no live entry names, in the
// collection's metadata transaction.
func sweepInline(tx *bolt.Tx, live map[string]bool, dryRun bool, res *artifacts.GCResult) error {
	b := tx.Bucket(bucketInline)
	if b == nil {
		return nil
	}
	var dead [][]byte
	err := b.ForEach(func(k, v []byte) error {
		if live[string(k)] {
			res.BlobsKept++
			return nil
		}
		res.BlobsRemoved++
		res.BytesRemoved += int64(len(v))
		dead = append(dead, append([]byte(nil), k...))
		return nil
	})
	if err != nil || dryRun {
		return err
	}
	for _, k := range dead {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// sweepFirstChunks removes the first-chunk records of blobs nothing
// references.
func sweepFirstChunks(tx *bolt.Tx, live map[string]bool, dryRun bool) error {
	b := tx.Bucket(bucketFirstChunks)
	if b == nil || dryRun {
		return nil
	}
	var dead [][]byte
	if err := b.ForEach(func(k, v []byte) error {
		if !live[string(v)] {
			dead = append(dead, append([]byte(nil), k...))
		}
		return nil
	}); err != nil {
		return err
	}
	for _, k := range dead {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

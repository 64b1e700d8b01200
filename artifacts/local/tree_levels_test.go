package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rlpipe/rlpipe/artifacts"
)

// canonicalTree builds, from the definition in tree.go and independently
// of builder, the tree of sorted entries es: its id, its root's level,
// and every metarange record it is made of (root included). It stores
// nothing.
func canonicalTree(es []entry) (string, int, map[string][]byte) {
	records := map[string][]byte{}
	var ranges metaRange
	var cur []entry
	for i, e := range es {
		cur = append(cur, e)
		if isBoundary(e.Path) || len(cur) >= maxRangeEntries || i == len(es)-1 {
			ranges = append(ranges, rangeRef{ID: digestOf(encodeEntries(cur)), Min: cur[0].Path, Max: e.Path, Count: len(cur)})
			cur = nil
		}
	}
	if len(ranges) == 0 {
		return emptyMetaRangeID, 1, records
	}
	if len(ranges) <= maxFlatRanges {
		data := encodeMeta(ranges)
		records[digestOf(data)] = data
		return digestOf(data), 1, records
	}
	refs := ranges
	for level := 1; ; level++ {
		var next, chunk metaRange
		for i, r := range refs {
			chunk = append(chunk, r)
			if !isNodeBoundary(level, r.Max) && len(chunk) < maxNodeRefs && i < len(refs)-1 {
				continue
			}
			// The node is built here by hand, not by nodeOf: this is the
			// test's own reading of the format the builder must write.
			var data []byte
			n := rangeRef{Min: chunk[0].Min, Max: r.Max}
			for _, c := range chunk {
				n.Count += c.Count
				if level == 1 {
					n.Ranges++
				} else {
					n.Ranges += c.Ranges
				}
			}
			if level == 1 {
				data = encodeMeta(chunk)
			} else {
				data = encodeNode(level, chunk)
			}
			n.ID = digestOf(data)
			records[n.ID] = data
			next = append(next, n)
			chunk = nil
		}
		if len(next) == 1 {
			return next[0].ID, level, records
		}
		refs = next
	}
}

// nodesOf returns the metarange records and ranges of tree id, by id.
func nodesOf(t *testing.T, tr trees, id string) (metas map[string]node, ranges map[string]rangeRef) {
	t.Helper()
	metas, ranges = map[string]node{}, map[string]rangeRef{}
	var walk func(id string)
	walk = func(id string) {
		n, err := tr.loadNode(id)
		if err != nil {
			t.Fatal(err)
		}
		metas[id] = n
		for _, r := range n.refs {
			if n.level == 1 {
				ranges[r.ID] = r
			} else {
				walk(r.ID)
			}
		}
	}
	walk(id)
	return metas, ranges
}

func keysOf(tx *bolt.Tx, bucket []byte) map[string]int {
	out := map[string]int{}
	tx.Bucket(bucket).ForEach(func(k, v []byte) error {
		out[string(k)] = len(v)
		return nil
	})
	return out
}

// added returns the keys of after that before lacks, and their bytes.
func added(before, after map[string]int) ([]string, int) {
	var ks []string
	n := 0
	for k, v := range after {
		if _, ok := before[k]; !ok {
			ks = append(ks, k)
			n += v
		}
	}
	slices.Sort(ks)
	return ks, n
}

func sortedEntries(m map[string]entry) []entry {
	es := slices.Collect(maps.Values(m))
	slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.Path, b.Path) })
	return es
}

func changesOf(m map[string]*entry) []change {
	var chs []change
	for p, e := range m {
		chs = append(chs, change{Path: p, Entry: e})
	}
	slices.SortFunc(chs, func(a, b change) int { return strings.Compare(a.Path, b.Path) })
	return chs
}

// TestALargeTreeHasLevels: 100,000 paths make a tree of three levels or
// more, as the definition says; changing one path's object writes one
// range and one metarange record a level (the chunk holding the range,
// the nodes above it, the root), a few KB, where the flat list of the
// tree's ranges is 160 KB.
func TestALargeTreeHasLevels(t *testing.T) {
	withTx(t, func(tr trees) {
		all := testEntries(100_000, "v1")
		id := applied(t, tr, emptyMetaRangeID, all)
		es := make([]entry, len(all))
		for i, c := range all {
			es[i] = *c.Entry
		}
		want, level, records := canonicalTree(es)
		if id != want {
			t.Fatalf("the tree of 100,000 paths is %s; by definition it is %s", id, want)
		}
		metas, ranges := nodesOf(t, tr, id)
		chunks := 0
		for _, n := range metas {
			if n.level == 1 {
				chunks++
			}
		}
		if root := metas[id]; root.level != level || level < 3 || chunks < 50 || len(ranges) < 1000 || len(metas) != len(records) {
			t.Fatalf("100,000 paths: root of level %d (want %d, at least 3), %d chunks, %d ranges, %d metarange records (want %d)", root.level, level, chunks, len(ranges), len(metas), len(records))
		}
		flat := len(encodeMeta(slices.Collect(maps.Values(ranges))))

		beforeM, beforeR := keysOf(tr.tx, bucketMetaRanges), keysOf(tr.tx, bucketRanges)
		e := *all[54_321].Entry
		e.Digest = digestOf([]byte("other"))
		id2 := applied(t, tr, id, []change{{Path: e.Path, Entry: &e}})
		newM, bytesM := added(beforeM, keysOf(tr.tx, bucketMetaRanges))
		newR, _ := added(beforeR, keysOf(tr.tx, bucketRanges))
		if len(newR) != 1 || len(newM) != level {
			t.Fatalf("changing one path wrote %d ranges and %d metarange records; want 1 and %d (one a level)", len(newR), len(newM), level)
		}
		// They are the records on the way from the new root to the path.
		var path []string
		for nid := id2; ; {
			n, err := tr.loadNode(nid)
			if err != nil {
				t.Fatal(err)
			}
			path = append(path, nid)
			i, _ := slices.BinarySearchFunc(n.refs, e.Path, func(r rangeRef, p string) int { return strings.Compare(r.Max, p) })
			if n.level == 1 {
				if n.refs[i].ID != newR[0] {
					t.Fatalf("the new range %s is not the one holding %s (%s)", newR[0], e.Path, n.refs[i].ID)
				}
				break
			}
			nid = n.refs[i].ID
		}
		slices.Sort(path)
		if !slices.Equal(path, newM) {
			t.Fatalf("new metarange records %v; the path to the change is %v", newM, path)
		}
		if bytesM > 16<<10 || bytesM*10 > flat {
			t.Fatalf("changing one path wrote %d bytes of metarange records; the flat list is %d", bytesM, flat)
		}
		// A lookup reads one record a level and one range; read twice,
		// it decodes (and caches) only those.
		fresh := trees{tx: tr.tx, cache: newTreeCache()}
		for range 2 {
			got, err := fresh.lookup(id2, e.Path)
			if err != nil || got == nil || got.Digest != e.Digest {
				t.Fatalf("lookup of the changed path = %+v, %v", got, err)
			}
		}
		if fresh.cache.metas.Len() != level || len(fresh.cache.ranges) != 1 {
			t.Fatalf("two lookups of a path decoded %d metarange records and %d ranges; want %d and 1", fresh.cache.metas.Len(), len(fresh.cache.ranges), level)
		}
		// A diff skips the nodes both trees share: it reads the records
		// on the way to the change on each side, and its range on each.
		fresh = trees{tx: tr.tx, cache: newTreeCache()}
		changed := changedPaths(t, fresh, id, id2)
		if len(changed) != 1 || changed[0] != e.Path || fresh.cache.metas.Len() != 2*level || len(fresh.cache.ranges) != 2 {
			t.Fatalf("diff found %v reading %d metarange records and %d ranges; want %s reading %d and 2", changed, fresh.cache.metas.Len(), len(fresh.cache.ranges), e.Path, 2*level)
		}
	})
}

// runIteration is what an iteration of a run commits (the layout of
// docs/FORMAT.md): its artifacts, its events and the run's state.
func runIteration(it int) []change {
	var chs []change
	put := func(p string) {
		chs = append(chs, change{Path: p, Entry: &entry{Path: p, Digest: digestOf([]byte(fmt.Sprint(p, it))), Size: 1000, Mtime: int64(it)}})
	}
	for _, f := range []string{"adapter/adapter_config.json", "adapter/adapter_model.safetensors", "adapter/optimizer.safetensors",
		"adapter/trainer_state.json", "advantages.parquet", "health.parquet", "prompts.parquet", "rewards.parquet",
		"train_metrics.json", "trajectories.parquet"} {
		put(fmt.Sprintf("iterations/%06d/%s", it, f))
	}
	put(fmt.Sprintf("events/%06d.jsonl", it))
	put(fmt.Sprintf("events/%06d.metrics.json", it))
	put("run/state.json")
	slices.SortFunc(chs, func(a, b change) int { return strings.Compare(a.Path, b.Path) })
	return chs
}

// TestRunCommitsWriteBoundedMetarangeBytes: the metarange bytes a run's
// commit writes at 2,000 iterations stay within a few KB, where a flat
// list of the tree's ranges (what every commit wrote before levels) is
// over 35 KB; at 20 iterations the tree is small and keeps the flat form.
func TestRunCommitsWriteBoundedMetarangeBytes(t *testing.T) {
	withTx(t, func(tr trees) {
		id := emptyMetaRangeID
		perCommit := map[int]float64{}
		for it := 1; it <= 2020; it++ {
			window := it > 20 && it <= 40 || it > 2000
			var before map[string]int
			if window {
				before = keysOf(tr.tx, bucketMetaRanges)
			}
			id = applied(t, tr, id, runIteration(it))
			if window {
				_, n := added(before, keysOf(tr.tx, bucketMetaRanges))
				perCommit[min(it, 2001)/1000] += float64(n) / 20
			}
		}
		early, late := perCommit[0], perCommit[2]
		root, _ := tr.loadNode(id)
		_, ranges := nodesOf(t, tr, id)
		flat := len(encodeMeta(slices.Collect(maps.Values(ranges))))
		t.Logf("metarange bytes a commit writes: %.0f at 20 iterations, %.0f at 2,000 (root level %d, %d ranges, flat list about %d bytes)", early, late, root.level, len(ranges), flat)
		if root.level < 2 || flat < 35_000 || late > 12_000 || early > 2_000 {
			t.Fatalf("metarange bytes a commit writes: %.0f at 20 iterations, %.0f at 2,000 (root level %d, flat list about %d bytes); want at most 2,000 and 12,000", early, late, root.level, flat)
		}
	})
}

// TestTreeAgreesWithAModel applies random sequences of changes (bulk
// additions, scattered edits and deletions, and removals of whole spans,
// so trees grow through the levels and shrink back to the flat form) and
// checks after each that the tree is the one its entries define, and that
// lookups, listing, seeks and diffs (whole and under a prefix) agree with
// a map.
func TestTreeAgreesWithAModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 3))
	steps := 60
	if testing.Short() {
		steps = 15
	}
	withTx(t, func(tr trees) {
		model := map[string]entry{}
		id := emptyMetaRangeID
		version := 0
		newEntry := func(p string) *entry {
			version++
			return &entry{Path: p, Digest: digestOf([]byte(fmt.Sprint(p, version))), Size: int64(version), Mtime: 1}
		}
		randPath := func() string {
			return fmt.Sprintf("d%02d/%c/f%07d", rng.IntN(30), 'a'+rng.IntN(3), rng.IntN(10_000_000))
		}
		levels := map[int]bool{}
		growing := true // to over 40,000 entries, then back under 4,000
		for step := 0; step < steps; step++ {
			switch {
			case len(model) > 40_000:
				growing = false
			case len(model) < 4_000:
				growing = true
			}
			chs := map[string]*entry{}
			switch op := rng.IntN(2); {
			case op == 0 && growing: // bulk addition
				for range 1000 + rng.IntN(8000) {
					p := randPath()
					chs[p] = newEntry(p)
				}
			case op == 0: // remove a span
				keys := slices.Sorted(maps.Keys(model))
				i := rng.IntN(len(keys))
				j := min(len(keys), i+rng.IntN(len(keys)/2+1))
				for _, p := range keys[i:j] {
					chs[p] = nil
				}
			default: // scattered edits, additions and deletions
				keys := slices.Collect(maps.Keys(model))
				for range 1 + rng.IntN(30) {
					switch {
					case len(keys) > 0 && rng.IntN(3) == 0:
						chs[keys[rng.IntN(len(keys))]] = nil
					case len(keys) > 0 && rng.IntN(2) == 0:
						p := keys[rng.IntN(len(keys))]
						chs[p] = newEntry(p)
					default:
						p := randPath()
						chs[p] = newEntry(p)
					}
				}
			}
			prev, prevModel := id, maps.Clone(model)
			id = applied(t, tr, prev, changesOf(chs))
			for p, e := range chs {
				if e == nil {
					delete(model, p)
				} else {
					model[p] = *e
				}
			}
			es := sortedEntries(model)
			want, level, _ := canonicalTree(es)
			if id != want {
				t.Fatalf("step %d: tree %s; its %d entries define %s", step, id, len(es), want)
			}
			levels[level] = true
			checkTree(t, step, tr, rng, id, es)
			checkDiff(t, step, tr, prev, id, "", prevModel, model)
			if len(es) > 0 {
				p := es[rng.IntN(len(es))].Path
				checkDiff(t, step, tr, prev, id, p[:rng.IntN(len(p)-3)+3], prevModel, model)
			}
		}
		if !levels[1] || slices.Max(slices.Collect(maps.Keys(levels))) < 3 {
			t.Fatalf("the sequence made trees of levels %v; want the flat form and three levels at least", levels)
		}
	})
}

// checkTree compares tree id with its sorted entries es: the whole
// listing, seeks, and lookups in place and decoded.
func checkTree(t *testing.T, step int, tr trees, rng *rand.Rand, id string, es []entry) {
	t.Helper()
	c, err := newCursor(tr, id)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		e, err := c.cur()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			if i != len(es) {
				t.Fatalf("step %d: listing ended after %d entries of %d", step, i, len(es))
			}
			break
		}
		if i >= len(es) || e.Path != es[i].Path || e.Digest != es[i].Digest {
			t.Fatalf("step %d: entry %d listed as %+v", step, i, e)
		}
		c.next()
	}
	fresh := trees{tx: tr.tx, cache: newTreeCache()}
	for range 30 {
		var key string
		if len(es) > 0 && rng.IntN(2) == 0 {
			key = es[rng.IntN(len(es))].Path
			if rng.IntN(2) == 0 {
				key += "~" // just after it
			}
		} else {
			key = fmt.Sprintf("d%02d/%c", rng.IntN(32), 'a'+rng.IntN(4))
		}
		i, found := slices.BinarySearchFunc(es, key, func(e entry, p string) int { return strings.Compare(e.Path, p) })
		for _, look := range []trees{fresh, fresh, tr} { // in place, then decoded
			e, err := look.lookup(id, key)
			if err != nil || (e != nil) != found || found && e.Digest != es[i].Digest {
				t.Fatalf("step %d: lookup %q = %+v, %v; want found %v", step, key, e, err, found)
			}
		}
		if err := c.seek(key); err != nil {
			t.Fatal(err)
		}
		for k := i; k < min(i+3, len(es))+1; k++ {
			e, err := c.cur()
			if err != nil {
				t.Fatal(err)
			}
			if k == len(es) {
				if e != nil {
					t.Fatalf("step %d: seek %q then %d nexts found %s past the end", step, key, k-i, e.Path)
				}
				break
			}
			if e == nil || e.Path != es[k].Path {
				t.Fatalf("step %d: seek %q then %d nexts found %+v, want %s", step, key, k-i, e, es[k].Path)
			}
			c.next()
		}
	}
}

// checkDiff compares treeDiff of a and b under prefix with the models'.
func checkDiff(t *testing.T, step int, tr trees, a, b, prefix string, ma, mb map[string]entry) {
	t.Helper()
	var want []string
	for p, e := range ma {
		if !strings.HasPrefix(p, prefix) {
			continue
		}
		if o, ok := mb[p]; !ok || !o.sameContent(&e) {
			want = append(want, p)
		}
	}
	for p := range mb {
		if _, ok := ma[p]; !ok && strings.HasPrefix(p, prefix) {
			want = append(want, p)
		}
	}
	slices.Sort(want)
	var got []string
	err := tr.treeDiff(a, b, prefix, func(p string, l, r *entry) (bool, error) {
		la, lok := ma[p]
		rb, rok := mb[p]
		if (l != nil) != lok || (r != nil) != rok || l != nil && l.Digest != la.Digest || r != nil && r.Digest != rb.Digest {
			return false, fmt.Errorf("%s: sides %+v, %+v", p, l, r)
		}
		got = append(got, p)
		return true, nil
	})
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("step %d: diff under %q: %d paths (%v), want %d", step, prefix, len(got), err, len(want))
	}
}

// testEntry is an object whose bytes are inline in the store.
func testEntry(tx *bolt.Tx, path, version string) (*entry, error) {
	data := []byte(path + "@" + version)
	e := &entry{Path: path, Digest: digestHex(data), Size: int64(len(data)), Mtime: 1}
	return e, putInline(tx, e.Digest, data)
}

// commitTree commits onto branch the tree that tree makes from its head's
// tree, as Commit does with staged changes (here many at once, without a
// transaction each).
func commitTree(t *testing.T, s *Store, branch string, tree func(tx *bolt.Tx, head string) (string, error)) artifacts.Commit {
	t.Helper()
	var c artifacts.Commit
	err := s.update(context.Background(), func(tx *bolt.Tx) error {
		b, err := getBranch(tx, branch)
		if err != nil {
			return err
		}
		head, err := getCommit(tx, b.CommitID)
		if err != nil {
			return err
		}
		id, err := tree(tx, head.MetaRangeID)
		if err != nil {
			return err
		}
		if c, err = s.newCommit(tx, []string{head.ID}, id, "test", "", time.Time{}, nil); err != nil {
			return err
		}
		return moveBranch(tx, branch, head.ID, c.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func commitEntries(t *testing.T, s *Store, branch string, paths []string, version string) artifacts.Commit {
	t.Helper()
	slices.Sort(paths)
	return commitTree(t, s, branch, func(tx *bolt.Tx, head string) (string, error) {
		var chs []change
		for _, p := range paths {
			e, err := testEntry(tx, p, version)
			if err != nil {
				return "", err
			}
			chs = append(chs, change{Path: p, Entry: e})
		}
		return s.trees(tx).apply(head, chs)
	})
}

func manyPaths(n int, format string) []string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = fmt.Sprintf(format, i)
	}
	return ps
}

// TestGCAndVerifyOfALeveledTree: on a store whose trees have levels,
// verify checks every chunk; gc removes the chunks and ranges only an
// unreachable commit used and keeps every one a branch reaches; a
// damaged or missing chunk is named, with the span of objects it hides,
// and gc refuses the store.
func TestGCAndVerifyOfALeveledTree(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	main := commitEntries(t, s, "main", manyPaths(30_000, "data/%06d.json"), "1")
	if _, err := s.CreateBranch(ctx, "tmp", "main"); err != nil {
		t.Fatal(err)
	}
	edited := append(manyPaths(50, "data/%06d.json"), manyPaths(500, "data/%06d.new")...)
	for i := range 50 {
		edited[i] = fmt.Sprintf("data/%06d.json", i*577)
	}
	tmp := commitEntries(t, s, "tmp", edited, "2")

	var mainMetas, tmpMetas map[string]node
	var mainRanges, tmpRanges map[string]rangeRef
	s.view(ctx, func(tx *bolt.Tx) error {
		tr := s.trees(tx)
		mainMetas, mainRanges = nodesOf(t, tr, main.MetaRangeID)
		tmpMetas, tmpRanges = nodesOf(t, tr, tmp.MetaRangeID)
		return nil
	})
	if root := mainMetas[main.MetaRangeID]; root.level < 2 {
		t.Fatalf("30,000 paths made a tree of level %d", root.level)
	}
	all := maps.Clone(mainMetas)
	maps.Copy(all, tmpMetas)
	allRanges := maps.Clone(mainRanges)
	maps.Copy(allRanges, tmpRanges)
	if len(all) == len(mainMetas) || len(all) >= len(mainMetas)+len(tmpMetas) {
		t.Fatalf("the two trees have %d and %d metarange records, %d in all: want some shared, some not", len(mainMetas), len(tmpMetas), len(all))
	}
	res, err := s.Verify(ctx, nil)
	if err != nil || len(res.Damage) != 0 || res.Trees != len(all)+len(allRanges) {
		t.Fatalf("verify: %+v, %v; want no damage and %d trees checked", res, err, len(all)+len(allRanges))
	}

	if err := s.DeleteBranch(ctx, "tmp"); err != nil {
		t.Fatal(err)
	}
	gc, err := s.GC(ctx, &artifacts.GCOptions{GracePeriod: -1})
	if err != nil || gc.CommitsRemoved != 1 {
		t.Fatalf("gc: %+v, %v; want the tmp commit removed", gc, err)
	}
	s.view(ctx, func(tx *bolt.Tx) error {
		gotM, gotR := keysOf(tx, bucketMetaRanges), keysOf(tx, bucketRanges)
		if !slices.Equal(slices.Sorted(maps.Keys(gotM)), slices.Sorted(maps.Keys(mainMetas))) {
			t.Errorf("after gc the store holds %d metarange records; main's tree has %d", len(gotM), len(mainMetas))
		}
		if !slices.Equal(slices.Sorted(maps.Keys(gotR)), slices.Sorted(maps.Keys(mainRanges))) {
			t.Errorf("after gc the store holds %d ranges; main's tree has %d", len(gotR), len(mainRanges))
		}
		return nil
	})
	n := 0
	for e, err := range s.ListObjects(ctx, "main", nil) {
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("data/%06d.json", n); e.Path != want {
			t.Fatalf("listing after gc: entry %d is %s, want %s", n, e.Path, want)
		}
		n++
	}
	if n != 30_000 {
		t.Fatalf("listing after gc: %d entries", n)
	}
	if res, err := s.Verify(ctx, nil); err != nil || len(res.Damage) != 0 {
		t.Fatalf("verify after gc: %v, %v", res.Damage, err)
	}

	// Damage one chunk of main's tree, then remove one.
	var chunk, upper rangeRef
	s.view(ctx, func(tx *bolt.Tx) error {
		root, _ := s.trees(tx).loadNode(main.MetaRangeID)
		upper = root.refs[len(root.refs)/2]
		n, _ := s.trees(tx).loadNode(upper.ID)
		for n.level > 1 {
			n, _ = s.trees(tx).loadNode(n.refs[0].ID)
		}
		for _, r := range root.refs {
			if r.ID != upper.ID {
				m, _ := s.trees(tx).loadNode(r.ID)
				if m.level == 1 {
					chunk = r
				} else {
					chunk = m.refs[len(m.refs)-1]
				}
				break
			}
		}
		return nil
	})
	for _, tc := range []struct {
		what    string
		r       rangeRef
		change  func([]byte) []byte
		problem string
	}{
		{"corrupted", chunk, flipMiddle, "its content does not match its id"},
		{"missing", upper, func([]byte) []byte { return nil }, "missing from the store"},
	} {
		var saved []byte
		s.view(ctx, func(tx *bolt.Tx) error {
			saved = bytes.Clone(tx.Bucket(bucketMetaRanges).Get([]byte(tc.r.ID)))
			return nil
		})
		edit(t, s, bucketMetaRanges, tc.r.ID, tc.change)
		res, err := s.Verify(ctx, nil)
		if err != nil || len(res.Damage) != 1 {
			t.Fatalf("%s chunk: verify %v, %v; want one damage", tc.what, res.Damage, err)
		}
		d := res.Damage[0]
		want := artifacts.Damage{Kind: artifacts.DamageChunk, ID: tc.r.ID, Ref: "main", Commit: main.ID, Path: tc.r.Min, Uses: 1}
		problem := fmt.Sprintf("%s; the objects %s … %s are not checked", tc.problem, tc.r.Min, tc.r.Max)
		if d.Problem != problem {
			t.Errorf("%s chunk: problem %q, want %q", tc.what, d.Problem, problem)
		}
		d.Problem = ""
		if d != want {
			t.Errorf("%s chunk: damage\n got %+v\nwant %+v", tc.what, d, want)
		}
		var de *artifacts.DamagedError
		if _, err := s.GC(ctx, &artifacts.GCOptions{GracePeriod: -1}); !errors.As(err, &de) {
			t.Fatalf("%s chunk: gc %v, want it refused", tc.what, err)
		}
		edit(t, s, bucketMetaRanges, tc.r.ID, func([]byte) []byte { return saved })
	}
}

func edit(t *testing.T, s *Store, bucket []byte, key string, change func([]byte) []byte) {
	t.Helper()
	err := s.update(context.Background(), func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		v := change(bytes.Clone(b.Get([]byte(key))))
		if v == nil {
			return b.Delete([]byte(key))
		}
		return b.Put([]byte(key), v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFlatMetarangesOfEarlierStoresRead: a store written before trees had
// levels holds large trees as one version-1 metarange listing every
// range. Such a tree (encoded here as that version wrote it) reads
// unchanged: lookups, listing, diff, verify and gc; it differs in nothing
// from the leveled tree of the same entries; and a commit on it writes
// the canonical leveled tree.
func TestFlatMetarangesOfEarlierStoresRead(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	paths := manyPaths(20_000, "old/%06d.bin")
	var flatID string
	var es []entry
	old := commitTree(t, s, "main", func(tx *bolt.Tx, _ string) (string, error) {
		var ranges metaRange
		var cur []entry
		for i, p := range paths {
			e, err := testEntry(tx, p, "old")
			if err != nil {
				return "", err
			}
			es = append(es, *e)
			cur = append(cur, *e)
			if isBoundary(p) || i == len(paths)-1 {
				data := encodeEntries(cur)
				if err := tx.Bucket(bucketRanges).Put([]byte(digestOf(data)), data); err != nil {
					return "", err
				}
				ranges = append(ranges, rangeRef{ID: digestOf(data), Min: cur[0].Path, Max: p, Count: len(cur)})
				cur = nil
			}
		}
		if len(ranges) <= maxFlatRanges {
			return "", fmt.Errorf("only %d ranges: not a large tree", len(ranges))
		}
		data := encodeMeta(ranges)
		flatID = digestOf(data)
		return flatID, tx.Bucket(bucketMetaRanges).Put([]byte(flatID), data)
	})
	leveled, level, _ := canonicalTree(es)
	if level < 2 || leveled == flatID {
		t.Fatalf("the same entries make a tree of level %d", level)
	}

	info, err := s.StatObject(ctx, "main", "old/012345.bin")
	if err != nil || info.Checksum != es[12345].Digest {
		t.Fatalf("stat in the flat tree: %+v, %v", info, err)
	}
	rc, _, err := s.GetObject(ctx, "main", "old/019999.bin")
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	body.ReadFrom(rc)
	rc.Close()
	if body.String() != "old/019999.bin@old" {
		t.Fatalf("read %q", body.String())
	}
	n := 0
	for e, err := range s.ListObjects(ctx, "main", &artifacts.ListOptions{Prefix: "old/0150"}) {
		if err != nil || e.Path != fmt.Sprintf("old/0150%02d.bin", n) {
			t.Fatalf("listing the flat tree: %+v, %v at %d", e, err, n)
		}
		n++
	}
	if n != 100 {
		t.Fatalf("listing the flat tree under old/0150: %d entries", n)
	}
	s.update(ctx, func(tx *bolt.Tx) error {
		// Write the leveled tree of the same entries beside it: no difference.
		var chs []change
		for i := range es {
			chs = append(chs, change{Path: es[i].Path, Entry: &es[i]})
		}
		tr := s.trees(tx)
		id, err := tr.apply(emptyMetaRangeID, chs)
		if err != nil || id != leveled {
			t.Fatalf("rebuilt tree %s, %v; want %s", id, err, leveled)
		}
		for _, pair := range [][2]string{{flatID, leveled}, {leveled, flatID}} {
			if err := tr.treeDiff(pair[0], pair[1], "", func(p string, _, _ *entry) (bool, error) {
				return false, fmt.Errorf("differs at %s", p)
			}); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})

	// A commit on the flat tree writes the canonical leveled tree.
	dev := commitEntries(t, s, "main", []string{"old/000100.bin", "old/zzz.bin"}, "new")
	var want []entry
	s.view(ctx, func(tx *bolt.Tx) error {
		want = append(want, es...)
		for _, p := range []string{"old/000100.bin", "old/zzz.bin"} {
			data := []byte(p + "@new")
			e := entry{Path: p, Digest: digestHex(data), Size: int64(len(data)), Mtime: 1}
			if i, ok := slices.BinarySearchFunc(want, p, func(e entry, p string) int { return strings.Compare(e.Path, p) }); ok {
				want[i] = e
			} else {
				want = append(want, e)
			}
		}
		return nil
	})
	if id, _, _ := canonicalTree(want); dev.MetaRangeID != id {
		t.Fatalf("the commit on the flat tree wrote %s; its entries define %s", dev.MetaRangeID, id)
	}
	var changed []string
	for c, err := range s.Diff(ctx, old.ID, dev.ID, &artifacts.DiffOptions{TwoDot: true}) {
		if err != nil {
			t.Fatal(err)
		}
		changed = append(changed, c.Path)
	}
	if !slices.Equal(changed, []string{"old/000100.bin", "old/zzz.bin"}) {
		t.Fatalf("diff of the flat tree and the next: %v", changed)
	}
	if _, err := s.CreateTag(ctx, "before-levels", old.ID); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Verify(ctx, nil); err != nil || len(res.Damage) != 0 {
		t.Fatalf("verify: %v, %v", res.Damage, err)
	}
	if _, err := s.GC(ctx, &artifacts.GCOptions{GracePeriod: -1}); err != nil {
		t.Fatal(err)
	}
	if info, err := s.StatObject(ctx, "before-levels", "old/000100.bin"); err != nil || info.Checksum != es[100].Digest {
		t.Fatalf("after gc the flat tree reads %+v, %v", info, err)
	}
}

// TestNodeCodec: a version-2 record round-trips, findChild reads it (and
// a version-1 one) in place as a search of the decoded record does, and
// malformed records are errors: an unknown version, a level below 2 or
// absurdly high, no children, trailing bytes.
func TestNodeCodec(t *testing.T) {
	m := metaRange{
		{ID: "n1", Min: "b", Max: "d", Count: 300, Ranges: 5},
		{ID: "n2", Min: "f", Max: "f", Count: 1, Ranges: 1},
		{ID: "n3", Min: "iterations/000001/a", Max: "iterations/000002/z", Count: 4000, Ranges: 60},
	}
	raw := encodeNode(3, m)
	n, err := decodeNode(raw)
	if err != nil || n.level != 3 || !slices.Equal(n.refs, m) {
		t.Fatalf("round trip = %+v, %v", n, err)
	}
	if n, err := decodeNode(encodeMeta(m)); err != nil || n.level != 1 || n.refs[2].ID != "n3" || n.refs[2].Ranges != 0 {
		t.Fatalf("a version-1 record decodes as %+v, %v", n, err)
	}
	for _, rec := range [][]byte{raw, encodeMeta(m)} {
		n, _ := decodeNode(rec)
		for _, p := range []string{"", "a", "b", "c", "d", "e", "f", "g", "iterations/000001/a", "iterations/000001/x", "iterations/000002/z", "zz"} {
			i := sort.Search(len(n.refs), func(i int) bool { return n.refs[i].Max >= p })
			want := ""
			if i < len(n.refs) && n.refs[i].Min <= p {
				want = n.refs[i].ID
			}
			if got, level, err := findChild(rec, p); err != nil || got != want || level != n.level {
				t.Errorf("findChild(level %d, %q) = %q, %d, %v; want %q", n.level, p, got, level, err, want)
			}
		}
	}
	for _, bad := range [][]byte{nil, {3, 2, 0}, {2, 1, 0}, {2, 65, 0}, {2, 2, 0}, raw[:len(raw)-1], append(bytes.Clone(raw), 0)} {
		if _, err := decodeNode(bad); err == nil {
			t.Errorf("decodeNode(%x) accepted a malformed record", bad)
		}
	}
	for _, bad := range [][]byte{nil, {3, 2, 0}, {2, 1, 0}, raw[:len(raw)-3]} {
		if _, _, err := findChild(bad, "zz"); err == nil {
			t.Errorf("findChild(%x) accepted a malformed record", bad)
		}
	}
}

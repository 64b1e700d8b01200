package local

import (
	"context"
	"fmt"
	"sort"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func testEntries(n int, version string) []change {
	chs := make([]change, n)
	for i := range chs {
		p := fmt.Sprintf("iterations/%06d/part-%d.parquet", i/7, i%7)
		chs[i] = change{Path: p, Entry: &entry{Path: p, Digest: digestOf([]byte(p + version)), Size: int64(i), Mtime: 1}}
	}
	return chs
}

// withTx runs fn in a write transaction of a new store, with trees over
// a fresh cache, so every range read is a cache miss that can be counted.
func withTx(t *testing.T, fn func(tr trees)) {
	t.Helper()
	s := newTestStore(t)
	if err := s.update(context.Background(), func(tx *bolt.Tx) error {
		fn(trees{tx: tx, cache: newTreeCache()})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// applied applies chs to tree base and returns the new tree's id; an
// error fails the test.
func applied(t *testing.T, tr trees, base string, chs []change) string {
	t.Helper()
	id, err := tr.apply(base, chs)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// changedPaths diffs trees a and b through tr and returns the paths that
// differ, in order; an error fails the test.
func changedPaths(t *testing.T, tr trees, a, b string) []string {
	t.Helper()
	var changed []string
	if err := tr.treeDiff(a, b, "", func(p string, _, _ *entry) (bool, error) {
		changed = append(changed, p)
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return changed
}

func TestTreeIsAFunctionOfItsEntries(t *testing.T) {
	withTx(t, func(tr trees) {
		all := testEntries(5000, "v1")
		whole := applied(t, tr, emptyMetaRangeID, all)
		// Built in two halves, interleaved.
		var even, odd []change
		for i, c := range all {
			if i%2 == 0 {
				even = append(even, c)
			} else {
				odd = append(odd, c)
			}
		}
		half := applied(t, tr, emptyMetaRangeID, even)
		halves := applied(t, tr, half, odd)
		// Changed in ten places and changed back.
		var edit, undo []change
		for i := 0; i < len(all); i += 500 {
			e := *all[i].Entry
			e.Digest = digestOf([]byte("other"))
			edit = append(edit, change{Path: e.Path, Entry: &e})
			undo = append(undo, all[i])
		}
		edited := applied(t, tr, whole, edit)
		restored := applied(t, tr, edited, undo)
		if halves != whole || restored != whole || edited == whole {
			t.Fatalf("tree ids: whole %s, halves %s, restored %s, edited %s: want the first three equal", whole, halves, restored, edited)
		}
		m, _ := tr.loadNode(whole)
		if m.level != 1 || len(m.refs) < 40 || len(m.refs) > 120 {
			t.Fatalf("5000 entries made %d ranges at level %d; want about 5000/64 at level 1", len(m.refs), m.level)
		}
	})
}

func TestDiffReadsOnlyChangedRanges(t *testing.T) {
	withTx(t, func(tr trees) {
		all := testEntries(10000, "v1")
		base := applied(t, tr, emptyMetaRangeID, all)
		var edit []change
		for i := 0; i < 10; i++ {
			e := *all[i*1000+3].Entry
			e.Digest = digestOf([]byte("other"))
			edit = append(edit, change{Path: e.Path, Entry: &e})
		}
		edited := applied(t, tr, base, edit)
		fresh := trees{tx: tr.tx, cache: newTreeCache()}
		changed := changedPaths(t, fresh, base, edited)
		if len(changed) != 10 {
			t.Fatalf("diff found %d changes, want 10", len(changed))
		}
		// Each change touches one range on each side.
		if read := len(fresh.cache.ranges); read > 2*10 {
			t.Fatalf("diff read %d ranges for 10 changes among 10000 paths; want at most 20", read)
		}
	})
}

func TestCodecRoundTripAndCorruption(t *testing.T) {
	es := []entry{
		{Path: "a", Digest: "d1", Size: 3, Mtime: -5},
		{Path: "b/é", Digest: "d2", Size: 1 << 40, Mtime: 7, ContentType: "text/plain", Metadata: map[string]string{"z": "1", "a": ""}},
	}
	got, err := decodeEntries(encodeEntries(es))
	if err != nil || len(got) != 2 || got[1].Metadata["z"] != "1" || got[1].Size != 1<<40 || got[0].Mtime != -5 {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	m := metaRange{{ID: "x", Min: "a", Max: "b", Count: 2}}
	gm, err := decodeMeta(encodeMeta(m))
	if err != nil || len(gm) != 1 || gm[0] != m[0] {
		t.Fatalf("meta round trip = %+v, %v", gm, err)
	}
	enc := encodeEntries(es)
	for _, bad := range [][]byte{nil, {9}, enc[:len(enc)-1], append(append([]byte{}, enc...), 0), {1, 0xff, 0xff, 0xff, 0xff, 0x0f}} {
		if _, err := decodeEntries(bad); err == nil {
			t.Errorf("decodeEntries(%x) accepted a malformed record", bad)
		}
	}
}

// TestFindRangeAgreesWithTheDecodedSearch: reading a metarange in place
// finds the range a binary search of the decoded metarange finds, for
// paths before, inside, between, on the edges of and after the ranges;
// a malformed record is an error, not a wrong answer.
func TestFindRangeAgreesWithTheDecodedSearch(t *testing.T) {
	m := metaRange{
		{ID: "r1", Min: "b", Max: "d", Count: 3},
		{ID: "r2", Min: "f", Max: "f", Count: 1},
		{ID: "r3", Min: "iterations/000001/a", Max: "iterations/000002/z", Count: 64},
	}
	raw := encodeMeta(m)
	search := func(path string) string {
		i := sort.Search(len(m), func(i int) bool { return m[i].Max >= path })
		if i == len(m) || m[i].Min > path {
			return ""
		}
		return m[i].ID
	}
	for _, p := range []string{"", "a", "b", "c", "d", "e", "f", "g", "iterations/000001/a", "iterations/000001/metrics.json", "iterations/000002/z", "iterations/000003", "zz"} {
		got, err := findRange(raw, p)
		if err != nil || got != search(p) {
			t.Errorf("findRange(%q) = %q, %v; the decoded search finds %q", p, got, err, search(p))
		}
	}
	for _, bad := range [][]byte{nil, {9}, raw[:len(raw)-5], {1, 3, 0xff}} {
		if _, err := findRange(bad, "zz"); err == nil {
			t.Errorf("findRange(%x) accepted a malformed record", bad)
		}
	}
}

// TestLookupReadsAMetarangeInPlaceOnce: the first lookup in a tree does
// not decode its metarange; the second decodes and caches it; all find
// the same entries.
func TestLookupReadsAMetarangeInPlaceOnce(t *testing.T) {
	withTx(t, func(tr trees) {
		chs := testEntries(2000, "v1")
		id := applied(t, tr, emptyMetaRangeID, chs)
		tr = trees{tx: tr.tx, cache: newTreeCache()} // as a reader in another process
		for i, ch := range []change{chs[999], chs[0], chs[1999], {Path: "iterations/999999/none"}} {
			e, err := tr.lookup(id, ch.Path)
			switch {
			case err != nil:
				t.Fatalf("lookup %d, %s: %v", i, ch.Path, err)
			case ch.Entry == nil && e != nil:
				t.Fatalf("lookup %d of a missing path found %+v", i, e)
			case ch.Entry != nil && (e == nil || e.Digest != ch.Entry.Digest):
				t.Fatalf("lookup %d, %s = %+v, want digest %s", i, ch.Path, e, ch.Entry.Digest)
			}
			if _, cached := tr.cache.metas.Get(id); cached != (i > 0) {
				t.Fatalf("after lookup %d the metarange is cached: %v", i, cached)
			}
		}
	})
}

// FuzzFindRange: on any bytes findRange does not panic, and on a record
// decodeMeta accepts whose ranges are in order it finds what a search of
// the decoded ranges finds.
func FuzzFindRange(f *testing.F) {
	f.Add(encodeMeta(metaRange{{ID: "r1", Min: "b", Max: "d", Count: 3}, {ID: "r2", Min: "f", Max: "g", Count: 1}}), "c")
	f.Add([]byte{1, 0}, "a")
	f.Fuzz(func(t *testing.T, raw []byte, path string) {
		got, err := findRange(raw, path)
		m, derr := decodeMeta(raw)
		if derr != nil {
			return
		}
		for i := range m { // a metarange's ranges are in path order and disjoint
			if m[i].Min > m[i].Max || i > 0 && m[i-1].Max >= m[i].Min {
				return
			}
		}
		i := sort.Search(len(m), func(i int) bool { return m[i].Max >= path })
		want := ""
		if i < len(m) && m[i].Min <= path {
			want = m[i].ID
		}
		if err != nil || got != want {
			t.Fatalf("findRange(%x, %q) = %q, %v; decoded search finds %q", raw, path, got, err, want)
		}
	})
}

// TestFindEntryAgreesWithTheDecodedRange: reading a range in place finds
// the entry decodeEntries decodes, metadata included, and nothing for a
// path the range does not hold; a malformed record is an error.
func TestFindEntryAgreesWithTheDecodedRange(t *testing.T) {
	es := []entry{
		{Path: "a", Digest: "d1", Size: 3, Mtime: -5},
		{Path: "b/é", Digest: "d2", Size: 1 << 40, Mtime: 7, ContentType: "text/plain", Metadata: map[string]string{"z": "1", "a": ""}},
		{Path: "c", Digest: "d3", Size: 0, Mtime: 1, Metadata: map[string]string{"k": "v"}},
	}
	raw := encodeEntries(es)
	for _, want := range es {
		got, err := findEntry(raw, want.Path)
		if err != nil || got == nil || got.Digest != want.Digest || got.Size != want.Size || got.Mtime != want.Mtime ||
			got.ContentType != want.ContentType || len(got.Metadata) != len(want.Metadata) || got.Metadata["z"] != want.Metadata["z"] || got.Metadata["k"] != want.Metadata["k"] {
			t.Errorf("findEntry(%q) = %+v, %v; want %+v", want.Path, got, err, want)
		}
	}
	for _, p := range []string{"", "0", "aa", "b", "bz", "d"} {
		if got, err := findEntry(raw, p); got != nil || err != nil {
			t.Errorf("findEntry(%q) = %+v, %v; want nothing", p, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {9}, raw[:len(raw)-1]} {
		if _, err := findEntry(bad, "c"); err == nil {
			t.Errorf("findEntry(%x) accepted a malformed record", bad)
		}
	}
}

// FuzzFindEntry: on any bytes findEntry does not panic, and on a record
// decodeEntries accepts whose paths are in order it finds what the
// decoded range holds.
func FuzzFindEntry(f *testing.F) {
	f.Add(encodeEntries([]entry{{Path: "a", Digest: "d", Size: 1, Mtime: 2, Metadata: map[string]string{"k": "v"}}, {Path: "b", Digest: "e"}}), "b")
	f.Fuzz(func(t *testing.T, raw []byte, path string) {
		got, err := findEntry(raw, path)
		es, derr := decodeEntries(raw)
		if derr != nil {
			return
		}
		for i := 1; i < len(es); i++ {
			if es[i-1].Path >= es[i].Path {
				return
			}
		}
		var want *entry
		for i := range es {
			if es[i].Path == path {
				want = &es[i]
			}
		}
		if err != nil || (got == nil) != (want == nil) || got != nil && (got.Digest != want.Digest || got.Size != want.Size || len(got.Metadata) != len(want.Metadata)) {
			t.Fatalf("findEntry(%x, %q) = %+v, %v; decoded range holds %+v", raw, path, got, err, want)
		}
	})
}

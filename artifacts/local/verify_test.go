package local

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/rlpipe/rlpipe/artifacts"
)

// damageFixture is a store with two commits on main, a tag on the first,
// and a staged object on a branch.
type damageFixture struct {
	s              *Store
	first, second  artifacts.Commit
	meta           string // the second commit's metarange
	rng            string // its first range
	big, small, st string // blob digests: big.bin, a.txt, staged.txt
}

func newDamageFixture(t *testing.T) *damageFixture {
	t.Helper()
	ctx := context.Background()
	s := newTestStore(t)
	f := &damageFixture{s: s}
	putT := func(branch, path string, body []byte) string {
		t.Helper()
		info, err := s.PutObject(ctx, branch, path, bytes.NewReader(body), nil)
		if err != nil {
			t.Fatal(err)
		}
		return info.Checksum
	}
	commit := func(msg string) artifacts.Commit {
		t.Helper()
		c, err := s.Commit(ctx, "main", msg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	f.small = putT("main", "a.txt", []byte("hello"))
	f.big = putT("main", "big.bin", bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16))
	f.first = commit("first")
	if _, err := s.CreateTag(ctx, "v1", f.first.ID); err != nil {
		t.Fatal(err)
	}
	putT("main", "b.txt", []byte("world"))
	f.second = commit("second")
	if _, err := s.CreateBranch(ctx, "dev", "main"); err != nil {
		t.Fatal(err)
	}
	f.st = putT("dev", "staged.txt", []byte("uncommitted"))
	f.meta = f.second.MetaRangeID
	err := s.view(ctx, func(tx *bolt.Tx) error {
		m, err := decodeMeta(tx.Bucket(bucketMetaRanges).Get([]byte(f.meta)))
		f.rng = m[0].ID
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// edit changes the raw record key of bucket (nil deletes it).
func (f *damageFixture) edit(t *testing.T, bucket []byte, key string, change func([]byte) []byte) {
	t.Helper()
	err := f.s.update(context.Background(), func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		v := change(append([]byte(nil), b.Get([]byte(key))...))
		if v == nil {
			return b.Delete([]byte(key))
		}
		return b.Put([]byte(key), v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (f *damageFixture) blob(digest string) string { return f.s.blobs.path(digest) }

func flipMiddle(b []byte) []byte {
	b[len(b)/2] ^= 0x01
	return b
}

func TestVerifyCleanStoreFindsNothing(t *testing.T) {
	f := newDamageFixture(t)
	for _, quick := range []bool{false, true} {
		res, err := f.s.Verify(context.Background(), &artifacts.VerifyOptions{Quick: quick})
		if err != nil {
			t.Fatal(err)
		}
		// Commits: created, first, second. Trees: two metaranges of one range each.
		if len(res.Damage) != 0 || res.Commits != 3 || res.Trees != 4 || res.Objects != 4 {
			t.Fatalf("verify (quick %v) a sound store: %+v, want 3 commits, 4 trees, 4 objects, no damage", quick, res)
		}
		if want := int64(0); quick && res.Bytes != want {
			t.Fatalf("a quick check read %d bytes", res.Bytes)
		}
	}
}

// TestVerifyNamesEachKindOfDamage damages one thing at a time and checks
// that Verify names it, and where it is used; and that gc refuses the
// store without removing anything.
func TestVerifyNamesEachKindOfDamage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, f *damageFixture)
		want    func(f *damageFixture) artifacts.Damage
		problem string
		quick   bool // found by a quick check too (and so refused by GC)
	}{{
		name: "blob content",
		damage: func(t *testing.T, f *damageFixture) {
			b, _ := os.ReadFile(f.blob(f.big))
			os.Chmod(f.blob(f.big), 0o644)
			if err := os.WriteFile(f.blob(f.big), flipMiddle(b), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		want: func(f *damageFixture) artifacts.Damage {
			return artifacts.Damage{Kind: "blob", ID: f.big, Ref: "dev", Commit: f.second.ID, Path: "big.bin", Uses: 2}
		},
		problem: "its content does not match its digest",
	}, {
		name: "inline blob content",
		damage: func(t *testing.T, f *damageFixture) {
			f.edit(t, bucketInline, f.small, flipMiddle)
		},
		want: func(f *damageFixture) artifacts.Damage {
			return artifacts.Damage{Kind: "blob", ID: f.small, Ref: "dev", Commit: f.second.ID, Path: "a.txt", Uses: 2}
		},
		problem: "its content does not match its digest",
		quick:   true, // inline bytes are small: a quick check reads them too
	}, {
		name: "missing blob",
		// a.txt is small: its bytes are inline in meta.db.
		damage: func(t *testing.T, f *damageFixture) {
			f.edit(t, bucketInline, f.small, func([]byte) []byte { return nil })
		},
		want: func(f *damageFixture) artifacts.Damage {
			return artifacts.Damage{Kind: "blob", ID: f.small, Ref: "dev", Commit: f.second.ID, Path: "a.txt", Uses: 2}
		},
		problem: "missing from the store",
		quick:   true,
	}, {
		name:   "missing blob file",
		damage: func(t *testing.T, f *damageFixture) { os.Remove(f.blob(f.big)) },
		want: func(f *damageFixture) artifacts.Damage {
			return artifacts.Damage{Kind: "blob", ID: f.big, Ref: "dev", Commit: f.second.ID, Path: "big.bin", Uses: 2}
		},
		problem: "missing from the store",
		quick:   true,
	}, {
		name: "missing staged blob",
		damage: func(t *testing.T, f *damageFixture) {
			f.edit(t, bucketInline, f.st, func([]byte) []byte { return nil })
		},
		want: func(f *damageFixture) artifacts.Damage {
			return artifacts.Damage{Kind: "blob", ID: f.st, Ref: "dev", Path: "staged.txt", Uses: 1}
		},
		problem: "missing from the store",
		quick:   true,
	}, {
		name: "truncated blob",
		damage: func(t *testing.T, f *damageFixture) {
			if err := os.Truncate(f.blob(f.big), 100); err != nil {
				t.Fatal(err)
			}
		},
		want: func(f *damageFixture) artifacts.Damage {
			return artifacts.Damage{Kind: "blob", ID: f.big, Ref: "dev", Commit: f.second.ID, Path: "big.bin", Uses: 2}
		},
		problem: "holds 100 bytes, recorded as 3145728",
		quick:   true,
	}, {
		name:   "corrupted range",
		damage: func(t *testing.T, f *damageFixture) { f.edit(t, bucketRanges, f.rng, flipMiddle) },
		want: func(f *damageFixture) artifacts.Damage {
			return artifacts.Damage{Kind: "range", ID: f.rng, Ref: "dev", Commit: f.second.ID, Path: "a.txt", Uses: 1}
		},
		problem: "its content does not match its id; the objects a.txt … big.bin are not checked",
		quick:   true,
	}, {
		name: "missing range",
		damage: func(t *testing.T, f *damageFixture) {
			f.edit(t, bucketRanges, f.rng, func([]byte) []byte { return nil })
		},
		want: func(f *damageFixture) artifacts.Damage {
			return artifacts.Damage{Kind: "range", ID: f.rng, Ref: "dev", Commit: f.second.ID, Path: "a.txt", Uses: 1}
		},
		problem: "missing from the store",
		quick:   true,
	}, {
		name:   "corrupted metarange",
		damage: func(t *testing.T, f *damageFixture) { f.edit(t, bucketMetaRanges, f.meta, flipMiddle) },
		want: func(f *damageFixture) artifacts.Damage {
			return artifacts.Damage{Kind: "metarange", ID: f.meta, Ref: "dev", Commit: f.second.ID, Uses: 1}
		},
		problem: "its content does not match its id",
		quick:   true,
	}, {
		name: "corrupted commit",
		damage: func(t *testing.T, f *damageFixture) {
			f.edit(t, bucketCommits, f.first.ID, func(b []byte) []byte { return bytes.Replace(b, []byte(`"first"`), []byte(`"fixed"`), 1) })
		},
		want: func(f *damageFixture) artifacts.Damage {
			return artifacts.Damage{Kind: "commit", ID: f.first.ID, Ref: "dev", Commit: f.second.ID, Uses: 2}
		},
		problem: "its content does not match its id",
		quick:   true,
	}, {
		name: "unreadable commit",
		damage: func(t *testing.T, f *damageFixture) {
			f.edit(t, bucketCommits, f.second.ID, func(b []byte) []byte { return b[:len(b)/2] })
		},
		want: func(f *damageFixture) artifacts.Damage {
			return artifacts.Damage{Kind: "commit", ID: f.second.ID, Ref: "dev", Uses: 2}
		},
		problem: "unreadable (unexpected end of JSON input); the history behind it is not checked",
		quick:   true,
	}, {
		name: "missing commit",
		damage: func(t *testing.T, f *damageFixture) {
			f.edit(t, bucketCommits, f.first.ID, func([]byte) []byte { return nil })
		},
		want: func(f *damageFixture) artifacts.Damage {
			return artifacts.Damage{Kind: "commit", ID: f.first.ID, Ref: "dev", Commit: f.second.ID, Uses: 2}
		},
		problem: "missing from the store",
		quick:   true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newDamageFixture(t)
			tc.damage(t, f)
			want := tc.want(f)
			res, err := f.s.Verify(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Damage) != 1 {
				t.Fatalf("verify found %d damaged things, want 1: %v", len(res.Damage), res.Damage)
			}
			got := res.Damage[0]
			if !strings.HasPrefix(got.Problem, tc.problem) {
				t.Errorf("problem %q, want it to start %q", got.Problem, tc.problem)
			}
			got.Problem = ""
			if got != want {
				t.Errorf("damage\n got %+v\nwant %+v", got, want)
			}
			quick, err := f.s.Verify(context.Background(), &artifacts.VerifyOptions{Quick: true})
			if err != nil {
				t.Fatal(err)
			}
			if found := len(quick.Damage) > 0; found != tc.quick {
				t.Errorf("a quick check found %v, want damage found: %v", quick.Damage, tc.quick)
			}
			if !tc.quick {
				return
			}
			before, _ := os.ReadDir(filepath.Join(f.s.Dir(), blobsDir))
			_, err = f.s.GC(context.Background(), &artifacts.GCOptions{GracePeriod: -1})
			var de *artifacts.DamagedError
			if !errors.As(err, &de) || !errors.Is(err, artifacts.ErrIntegrity) || !strings.Contains(err.Error(), "rlpipe fsck") {
				t.Fatalf("gc on a damaged store: %v, want a DamagedError that says to run fsck", err)
			}
			after, _ := os.ReadDir(filepath.Join(f.s.Dir(), blobsDir))
			if len(after) != len(before) {
				t.Fatalf("gc refused but removed blobs: %d blob directories before, %d after", len(before), len(after))
			}
		})
	}
}

// TestDamageSaysWhereItIsUsed checks the words of a Damage.
func TestDamageSaysWhereItIsUsed(t *testing.T) {
	for _, tc := range []struct {
		d    artifacts.Damage
		want string
	}{
		{artifacts.Damage{Kind: "blob", ID: "ab12", Problem: "missing from the store", Ref: "main", Commit: "0123456789abcdef", Path: "x.bin", Uses: 3},
			"blob ab12: missing from the store (x.bin in commit 0123456789ab, reached from main, and 2 other uses)"},
		{artifacts.Damage{Kind: "blob", ID: "ab12", Problem: "missing from the store", Ref: "dev", Path: "x.bin", Uses: 1},
			"blob ab12: missing from the store (dev:x.bin, uncommitted)"},
		{artifacts.Damage{Kind: "commit", ID: "cd34", Problem: "missing from the store", Ref: "v1", Commit: "ef56", Uses: 2},
			"commit cd34: missing from the store (named by commit ef56, reached from v1, and 1 other use)"},
		{artifacts.Damage{Kind: "commit", ID: "cd34", Problem: "unreadable", Ref: "main", Uses: 1},
			"commit cd34: unreadable (head of main)"},
	} {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

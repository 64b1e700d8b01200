package artifactstest

import (
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/rlpipe/rlpipe/artifacts"
)

var listingScenarios = []scenario{
	{"Options", testListOptions},
	{"Entries", testListEntries},
	{"Pagination", testListPagination},
}

func testListOptions(f *fixture) {
	t := f.t
	for _, p := range []string{"c", "a/b/4", "a/1", "ab", "a/b/3", "a/2"} {
		f.put("main", p, "content of "+p)
	}
	cases := []struct {
		name string
		opts *artifacts.ListOptions
		want []string
	}{
		{"all in path order", nil, []string{"a/1", "a/2", "a/b/3", "a/b/4", "ab", "c"}},
		{"prefix", &artifacts.ListOptions{Prefix: "a/"}, []string{"a/1", "a/2", "a/b/3", "a/b/4"}},
		{"prefix without slash", &artifacts.ListOptions{Prefix: "a"}, []string{"a/1", "a/2", "a/b/3", "a/b/4", "ab"}},
		{"prefix and delimiter", &artifacts.ListOptions{Prefix: "a/", Delimiter: "/"}, []string{"a/1", "a/2", "a/b/ (prefix)"}},
		{"delimiter at the root", &artifacts.ListOptions{Delimiter: "/"}, []string{"a/ (prefix)", "ab", "c"}},
		{"deeper prefix and delimiter", &artifacts.ListOptions{Prefix: "a/b/", Delimiter: "/"}, []string{"a/b/3", "a/b/4"}},
		{"after", &artifacts.ListOptions{After: "a/2"}, []string{"a/b/3", "a/b/4", "ab", "c"}},
		{"after a path that is not stored", &artifacts.ListOptions{After: "a/10"}, []string{"a/2", "a/b/3", "a/b/4", "ab", "c"}},
		{"after the last", &artifacts.ListOptions{After: "c"}, []string{}},
		{"limit", &artifacts.ListOptions{Limit: 2}, []string{"a/1", "a/2"}},
		{"after and limit", &artifacts.ListOptions{After: "a/1", Limit: 2}, []string{"a/2", "a/b/3"}},
		{"prefix and after", &artifacts.ListOptions{Prefix: "a/", After: "a/b/3"}, []string{"a/b/4"}},
		{"limit past the end", &artifacts.ListOptions{Prefix: "a/b/", Limit: 10}, []string{"a/b/3", "a/b/4"}},
		{"prefix matching nothing", &artifacts.ListOptions{Prefix: "zz/"}, []string{}},
	}
	check := func(ref string) {
		t.Helper()
		for _, c := range cases {
			wantSlice(t, fmt.Sprintf("list %s, %s", ref, c.name), f.listPaths(ref, c.opts), c.want)
		}
	}
	check("main")
	f.commit("main", "listing")
	check("main@")
	check("main")
}

func testListEntries(f *fixture) {
	t := f.t
	meta := map[string]string{"rlpipe-task": "rollout"}
	put := f.putWith("main", "runs/r1/rollouts.parquet", []byte("0123456789"), &artifacts.PutOptions{Metadata: meta})
	f.put("main", "runs/r1/logs/train.log", "log")
	entries := f.list("main", &artifacts.ListOptions{Prefix: "runs/r1/", Delimiter: "/"})
	wantSlice(t, "list with delimiter", entryNames(entries), []string{"runs/r1/logs/ (prefix)", "runs/r1/rollouts.parquet"})
	obj := entries[1]
	wantEqual(t, "listed object: size", obj.Size, int64(10))
	wantEqual(t, "listed object: checksum", obj.Checksum, put.Checksum)
	if obj.CommonPrefix {
		t.Fatalf("listed object: marked as a common prefix")
	}
	if !entries[0].CommonPrefix {
		t.Fatalf("listed prefix: not marked as a common prefix")
	}
}

// pageCount is more than one page of a lakeFS listing (at most 1000).
const pageCount = 1100

func testListPagination(f *fixture) {
	t := f.t
	want := make([]string, pageCount)
	for i := range want {
		want[i] = fmt.Sprintf("many/%05d.json", i)
	}
	g, ctx := errgroup.WithContext(f.ctx)
	g.SetLimit(8)
	for i := len(want) - 1; i >= 0; i-- { // reverse order: the store sorts
		p := want[i]
		g.Go(func() error {
			if _, err := f.st.PutObject(ctx, "main", p, stringReader(p), nil); err != nil {
				return fmt.Errorf("put %s: %w", p, err)
			}
			return nil
		})
	}
	f.put("main", "other/outside", "x")
	if err := g.Wait(); err != nil {
		t.Fatalf("put %d objects: %v", pageCount, err)
	}

	check := func(ref string) {
		t.Helper()
		wantSlice(t, "list "+ref+" across pages", f.listPaths(ref, &artifacts.ListOptions{Prefix: "many/"}), want)
		wantSlice(t, "list "+ref+" with limit 1050", f.listPaths(ref, &artifacts.ListOptions{Prefix: "many/", Limit: 1050}), want[:1050])
		wantSlice(t, "list "+ref+" after 00999", f.listPaths(ref, &artifacts.ListOptions{Prefix: "many/", After: want[999]}), want[1000:])
		wantSlice(t, "list "+ref+" folded", f.listPaths(ref, &artifacts.ListOptions{Delimiter: "/"}), []string{"many/ (prefix)", "other/ (prefix)"})
		all := f.listPaths(ref, nil)
		wantEqual(t, "list "+ref+" everything: count", len(all), pageCount+1)
		wantEqual(t, "list "+ref+" everything: last", all[pageCount], "other/outside")
	}
	check("main")
	f.commit("main", "many")
	check("main@")
}

package storeserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
)

// objectStats is the part of lakeFS's ObjectStats these tests read.
type objectStats struct {
	Path     string            `json:"path"`
	Checksum string            `json:"checksum"`
	Metadata map[string]string `json:"metadata"`
}

func decodeStats(t *testing.T, body string) objectStats {
	t.Helper()
	var st objectStats
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("ObjectStats %q: %v", body, err)
	}
	return st
}

// TestRecordedSHA256IsNotKeptByDefault checks that, without
// Faults.MD5Checksums, the SHA-256 the lakefs:// backend sends is not
// stored (it is the embedded store's checksum already), and that one put
// into the store directly is not reported, so it never stands in for the
// store's checksum.
func TestRecordedSHA256IsNotKeptByDefault(t *testing.T) {
	backing, url, st := served(t)
	ctx := context.Background()
	content := []byte("prompts\n")
	meta := map[string]string{"rlpipe-task": "gen"}
	if _, err := st.PutObject(ctx, "main", "through.txt", bytes.NewReader(content), &artifacts.PutOptions{Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	in := artifactstest.Stat(t, backing, "main", "through.txt")
	if in.Checksum != artifactstest.SHA256Hex(content) || !maps.Equal(in.Metadata, meta) {
		t.Errorf("put through the server: stored %+v, want checksum %s and metadata %v", in, artifactstest.SHA256Hex(content), meta)
	}

	// A value that is not the content's SHA-256, put directly.
	lie := map[string]string{lakefsapi.MetaSHA256: artifactstest.SHA256Hex([]byte("other bytes")), "rlpipe-task": "gen"}
	if _, err := backing.PutObject(ctx, "main", "direct.txt", bytes.NewReader(content), &artifacts.PutOptions{Metadata: lie}); err != nil {
		t.Fatal(err)
	}
	info := artifactstest.Stat(t, st, "main", "direct.txt")
	if info.Checksum != artifactstest.SHA256Hex(content) || !maps.Equal(info.Metadata, meta) {
		t.Errorf("stat through the server: %+v, want the store's checksum %s and metadata %v", info, artifactstest.SHA256Hex(content), meta)
	}
	_, _, body := do(t, "GET", url+storeserver.APIBasePath+"/repositories/"+testRepo+"/refs/main/objects/stat?path=direct.txt", "", nil)
	if got := decodeStats(t, body); got.Checksum != artifactstest.SHA256Hex(content) || !maps.Equal(got.Metadata, meta) {
		t.Errorf("stat answer %s: want checksum %s and metadata %v", body, artifactstest.SHA256Hex(content), meta)
	}
}

// TestMD5Checksums checks every answer that describes an object when the
// server reports checksums as lakeFS's local block store does, for an
// object uploaded through the server and for one it did not see written.
func TestMD5Checksums(t *testing.T) {
	backing := newLocal(t)
	url := serve(t, backing, &storeserver.Options{AccessKeyID: testKey, SecretAccessKey: testSecret, Faults: storeserver.Faults{MD5Checksums: true}})
	repo := url + storeserver.APIBasePath + "/repositories/" + testRepo
	content := "0123456789 trajectories\n"
	want := artifactstest.MD5Hex([]byte(content))

	status, _, body := do(t, "POST", repo+"/branches/main/objects?path=up.txt", content, http.Header{"X-Lakefs-Meta-Rlpipe-Sha256": {artifactstest.SHA256Hex([]byte(content))}})
	if got := decodeStats(t, body); status != http.StatusCreated || got.Checksum != want || got.Metadata[lakefsapi.MetaSHA256] != artifactstest.SHA256Hex([]byte(content)) {
		t.Fatalf("upload: %d %s, want checksum %s and the SHA-256 kept as metadata", status, body, want)
	}
	if _, err := backing.PutObject(context.Background(), "main", "direct.txt", strings.NewReader(content), nil); err != nil {
		t.Fatal(err)
	}
	status, _, body = do(t, "POST", repo+"/branches/main/objects/copy?dest_path=copied.txt", `{"src_path": "direct.txt"}`, nil)
	if got := decodeStats(t, body); status != http.StatusCreated || got.Checksum != want {
		t.Fatalf("copy: %d %s, want checksum %s", status, body, want)
	}
	for _, path := range []string{"up.txt", "direct.txt", "copied.txt"} {
		_, _, body := do(t, "GET", repo+"/refs/main/objects/stat?path="+path, "", nil)
		if got := decodeStats(t, body); got.Checksum != want {
			t.Errorf("stat %s: %s, want checksum %s", path, body, want)
		}
		for _, c := range []struct {
			method string
			header http.Header
		}{{"GET", nil}, {"HEAD", nil}, {"GET", http.Header{"Range": {"bytes=2-5"}}}} {
			_, h, _ := do(t, c.method, repo+"/refs/main/objects?path="+path, "", c.header)
			if etag := h.Get("ETag"); etag != `"`+want+`"` {
				t.Errorf("%s %s %v: ETag %s, want %q", c.method, path, c.header, etag, want)
			}
		}
	}
	_, _, body = do(t, "GET", repo+"/refs/main/objects/ls", "", nil)
	var page struct {
		Results []objectStats `json:"results"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Results) != 3 {
		t.Fatalf("list: %s, want 3 objects", body)
	}
	for _, st := range page.Results {
		if st.Checksum != want {
			t.Errorf("list: %s has checksum %s, want %s", st.Path, st.Checksum, want)
		}
	}
}

package storeserver_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
)

// TestWithoutBlockStore: a server without a block store says so in its
// configuration and answers the staging endpoints 501, as a lakeFS whose
// block store cannot presign.
func TestWithoutBlockStore(t *testing.T) {
	_, url, _ := served(t)
	api := url + storeserver.APIBasePath
	status, _, body := do(t, "GET", api+"/config", "", nil)
	want := `{"storage_config":{"blockstore_type":"local","pre_sign_support":false},"storage_config_list":[{"blockstore_type":"local","pre_sign_support":false}]}` + "\n"
	if status != 200 || body != want {
		t.Errorf("GET /config: %d %s, want 200 %s", status, body, want)
	}
	for _, method := range []string{"GET", "PUT"} {
		status, _, body := do(t, method, api+"/repositories/"+testRepo+"/branches/main/staging/backing?path=a&presign=true", `{"staging":{}}`, nil)
		verb := map[string]string{"GET": "stage", "PUT": "link"}[method]
		want := `{"message":"Not Implemented: ` + verb + ` main:a: this server offers no presigned transfers (pre_sign_support is false in GET /config): upload through POST …/objects instead"}` + "\n"
		if status != http.StatusNotImplemented || body != want {
			t.Errorf("%s staging: %d %s, want 501 %s", method, status, body, want)
		}
	}
}

// TestStagingFaults sends what a client should not: links of addresses
// that hold no complete upload or whose size or checksum is wrong, and
// uploads to URLs that are not signed as the block store signs them.
// Each is refused with a message that says what to do; a refused link
// leaves the upload to link again.
func TestStagingFaults(t *testing.T) {
	backing := newLocal(t)
	bs := artifactstest.ServeBlockStore(t, storeserver.BlockStoreOptions{})
	_, base := artifactstest.Serve(t, backing, &storeserver.Options{AccessKeyID: testKey, SecretAccessKey: testSecret, BlockStore: bs})
	staging := base + storeserver.APIBasePath + "/repositories/" + testRepo + "/branches/main/staging/backing?path=w%2Fa"

	status, _, body := do(t, "GET", strings.Replace(staging, "/main/", "/nope/", 1)+"&presign=true", "", nil)
	if status != http.StatusNotFound || !strings.Contains(body, "branch not found") {
		t.Errorf("stage on a missing branch: %d %s", status, body)
	}
	status, _, body = do(t, "GET", staging+"&presign=true", "", nil)
	var loc lakefsapi.StagingLocation
	if status != 200 || json.Unmarshal([]byte(body), &loc) != nil || loc.PresignedURL == "" || !strings.HasPrefix(loc.PhysicalAddress, "block://") {
		t.Fatalf("getPhysicalAddress: %d %s", status, body)
	}
	u, err := url.Parse(loc.PresignedURL)
	if err != nil {
		t.Fatal(err)
	}
	tampered := *u
	q := tampered.Query()
	q.Set("X-Rlpipe-Signature", strings.Repeat("0", 64))
	tampered.RawQuery = q.Encode()
	unsigned := *u
	unsigned.RawQuery = ""

	uploads := []struct {
		name, url string
		status    int
		body      string
	}{
		{"unsigned", unsigned.String(), 403, "<Error><Code>AccessDenied</Code><Message>Request is not presigned: it has no expiry.</Message></Error>"},
		{"tampered", tampered.String(), 403, "<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match the signature you provided.</Message></Error>"},
		{"signed", loc.PresignedURL, 200, ""},
	}
	for _, up := range uploads {
		status, h, body := do(t, "PUT", up.url, "0123456789", http.Header{"Authorization": {"none"}})
		if status != up.status || !strings.Contains(body, up.body) {
			t.Errorf("upload %s: %d %s, want %d %s", up.name, status, body, up.status, up.body)
		}
		if up.status == 200 && h.Get("ETag") != `"781e5e245d69b566979b86e28d23f2c7"` {
			t.Errorf("upload: ETag %q, want the MD5 of the bytes", h.Get("ETag"))
		}
	}

	link := func(addr string, size int, checksum string) (int, string) {
		b, _ := json.Marshal(lakefsapi.StagingMetadata{Staging: lakefsapi.StagingLocation{PhysicalAddress: addr}, Checksum: checksum, SizeBytes: int64(size)})
		status, _, body := do(t, "PUT", staging, string(b), nil)
		return status, body
	}
	links := []struct {
		name     string
		addr     string
		size     int
		checksum string
		status   int
		message  string
	}{
		{"foreign address", "s3://bucket/a", 10, "", 400, `link main:w/a: physical address \"s3://bucket/a\" is not one this server handed out (want block://<id> from getPhysicalAddress)`},
		{"never uploaded", "block://0123456789abcdef", 10, "", 400, `link main:w/a: physical address \"block://0123456789abcdef\" holds no complete upload: upload the bytes to its presigned URL first, then link`},
		{"wrong size", loc.PhysicalAddress, 11, "", 400, `link main:w/a: size_bytes 11, but \"` + loc.PhysicalAddress + `\" holds 10 bytes`},
		{"wrong checksum", loc.PhysicalAddress, 10, "00", 400, `link main:w/a: checksum \"00\", but the block store's ETag of \"` + loc.PhysicalAddress + `\" is \"781e5e245d69b566979b86e28d23f2c7\"`},
		{"linked", loc.PhysicalAddress, 10, `"781e5e245d69b566979b86e28d23f2c7"`, 200, `"path":"w/a"`},
		{"linked twice", loc.PhysicalAddress, 10, "", 400, `holds no complete upload`},
	}
	for _, l := range links {
		status, body := link(l.addr, l.size, l.checksum)
		if status != l.status || !strings.Contains(body, l.message) {
			t.Errorf("link %s: %d %s, want %d %s", l.name, status, body, l.status, l.message)
		}
	}
	if got := string(artifactstest.Read(t, backing, "main", "w/a")); got != "0123456789" {
		t.Errorf("linked object holds %q", got)
	}
	if bs.Pending() != 0 {
		t.Errorf("%d blocks wait to be linked, want 0", bs.Pending())
	}
}

package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
)

const (
	storeTestKey    = "AKIASTORESERVECLI001"
	storeTestSecret = "cli-store-serve-test-secret-value"
)

// TestStoreServe runs `rlpipe store serve` in-process on 127.0.0.1:0 with
// credentials, then acts as a worker: with the variables it printed set,
// artifacts.Open("lakefs://…") and the CLI itself write and read through
// it, and the objects land in the served store with its checksums.
func TestStoreServe(t *testing.T) {
	h := newStore(t) // the embedded store dir/store: repository "store"
	h.env[storeserver.EnvAccessKeyID] = storeTestKey
	h.env[storeserver.EnvSecretAccessKey] = storeTestSecret
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr strings.Builder
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--store", h.store, "store", "serve", "--addr", "127.0.0.1:0"}, environ{
			stdin: strings.NewReader(""), stdout: pw, stderr: &stderr,
			getenv: func(k string) string { return h.env[k] },
		})
		pw.Close()
	}()

	// serving store DIR as lakefs://store on http://127.0.0.1:PORT (Ctrl-C stops it)
	// a worker uses it with:
	//   export LAKECTL_SERVER_ENDPOINT_URL=http://127.0.0.1:PORT
	//   …
	out := bufio.NewReader(pr)
	var printed []string
	for len(printed) < 7 {
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("read the served endpoint: %v (printed %q, stderr %s)", err, printed, stderr.String())
		}
		printed = append(printed, line)
	}
	go io.Copy(io.Discard, out)
	endpoint := strings.TrimPrefix(strings.TrimSpace(printed[2]), "export LAKECTL_SERVER_ENDPOINT_URL=")
	if !strings.HasPrefix(endpoint, "http://127.0.0.1:") {
		t.Fatalf("printed endpoint %q", printed[2])
	}
	want := []string{
		"serving store " + h.store + " as lakefs://store on " + endpoint + " (Ctrl-C stops it)\n",
		"a worker uses it with:\n",
		"  export LAKECTL_SERVER_ENDPOINT_URL=" + endpoint + "\n",
		"  export RLPIPE_STORE=lakefs://store\n",
		"  export LAKECTL_CREDENTIALS_ACCESS_KEY_ID=\"$RLPIPE_STORE_ACCESS_KEY_ID\"\n",
		"  export LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY=\"$RLPIPE_STORE_SECRET_ACCESS_KEY\"\n",
		"(the credentials are the values of RLPIPE_STORE_ACCESS_KEY_ID and RLPIPE_STORE_SECRET_ACCESS_KEY on this machine)\n",
	}
	sameLines(t, "printed", printed, want, "")

	// A worker.
	t.Setenv(lakefs.EnvEndpoint, endpoint)
	t.Setenv(lakefs.EnvAccessKeyID, storeTestKey)
	t.Setenv(lakefs.EnvSecretAccessKey, storeTestSecret)
	wctx := context.Background()
	worker, err := artifacts.Open(wctx, "lakefs://store", nil)
	if err != nil {
		t.Fatalf("open lakefs://store: %v", err)
	}
	defer worker.Close()
	put, err := worker.PutObject(wctx, "main", "data/hello.txt", strings.NewReader("hello through the server\n"), nil)
	if err != nil {
		t.Fatalf("put through the server: %v", err)
	}
	if _, err := worker.Commit(wctx, "main", "hello", nil); err != nil {
		t.Fatalf("commit through the server: %v", err)
	}
	rc, info, err := worker.GetObject(wctx, "main@", "data/hello.txt")
	if err != nil {
		t.Fatalf("get through the server: %v", err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(got) != "hello through the server\n" || info.Checksum != put.Checksum {
		t.Fatalf("read back %q (checksum %s), %v; want the object put (checksum %s)", got, info.Checksum, err, put.Checksum)
	}

	// The CLI as a worker, and the store itself, see the same object.
	worker2 := &harness{t: t, store: "lakefs://store", env: map[string]string{}}
	if out := worker2.ok("cat", "main:data/hello.txt"); out != "hello through the server\n" {
		t.Fatalf("rlpipe --store lakefs://store cat: %q", out)
	}
	direct, err := local.Open(wctx, h.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	st, err := direct.StatObject(wctx, "main", "data/hello.txt")
	if err != nil || st.Checksum != put.Checksum {
		t.Fatalf("in the served store: %+v, %v; want checksum %s", st, err, put.Checksum)
	}

	cancel()
	if code := <-done; code != ExitOK {
		t.Fatalf("store serve after cancel: exit %d, stderr %s", code, stderr.String())
	}
	for _, secret := range []string{storeTestKey, storeTestSecret} {
		if strings.Contains(strings.Join(printed, "")+stderr.String(), secret) {
			t.Fatalf("store serve printed a credential value")
		}
	}
}

// TestStoreServeRefusesPublicAddressWithoutCredentials binds every
// interface without credentials.
func TestStoreServeRefusesPublicAddressWithoutCredentials(t *testing.T) {
	h := newStore(t)
	want := "rlpipe: store serve: storeserver: listen 0.0.0.0:8001: a store server bound to an address other than loopback needs credentials: " +
		"set RLPIPE_STORE_ACCESS_KEY_ID and RLPIPE_STORE_SECRET_ACCESS_KEY (e.g. to $(openssl rand -hex 16) each), or bind 127.0.0.1\n"
	if got := h.fails(ExitFailure, nil, "store", "serve", "--addr", "0.0.0.0:8001"); got != want {
		t.Fatalf("stderr\n got %q\nwant %q", got, want)
	}
	// One variable without the other is refused too.
	h.env[storeserver.EnvAccessKeyID] = storeTestKey
	want = "rlpipe: store serve: storeserver: invalid argument: set both the access key id and the secret access key " +
		"(RLPIPE_STORE_ACCESS_KEY_ID and RLPIPE_STORE_SECRET_ACCESS_KEY), or neither\n"
	if got := h.fails(ExitFailure, nil, "store", "serve", "--addr", "0.0.0.0:8001"); got != want {
		t.Fatalf("stderr\n got %q\nwant %q", got, want)
	}
}

// TestStoreServeJSON serves on loopback without credentials and checks
// the JSON description, then stops.
func TestStoreServeJSON(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := local.Create(ctx, filepath.Join(t.TempDir(), ".rlpipe"), "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- storeServe(ctx, st, "./.rlpipe", storeServeOptions{addr: "127.0.0.1:0"}, storeCredentials{}, zerolog.Nop(), printer{w: pw, json: true})
		pw.Close()
	}()
	var got struct {
		Store           string            `json:"store"`
		Repository      string            `json:"repository"`
		Endpoint        string            `json:"endpoint"`
		Auth            bool              `json:"auth"`
		Env             map[string]string `json:"env"`
		CredentialsFrom map[string]string `json:"credentials_from"`
	}
	dec := json.NewDecoder(pr)
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	if got.Store != "./.rlpipe" || got.Repository != "rlpipe" || got.Auth || got.CredentialsFrom != nil ||
		!strings.HasPrefix(got.Endpoint, "http://127.0.0.1:") || len(got.Env) != 2 ||
		got.Env["LAKECTL_SERVER_ENDPOINT_URL"] != got.Endpoint || got.Env["RLPIPE_STORE"] != "lakefs://rlpipe" {
		t.Fatalf("JSON description: %+v", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve after cancel: %v", err)
	}
}

func TestStoreRepositoryName(t *testing.T) {
	for name, want := range map[string]string{
		"runs": "runs", ".rlpipe": "rlpipe", "My Store": "my-store", "rl__runs.v2": "rl-runs-v2", "x": "x", "..": "..",
	} {
		if got := repositoryName(name); got != want {
			t.Errorf("repositoryName(%q) = %q, want %q", name, got, want)
		}
	}
}

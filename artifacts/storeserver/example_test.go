package storeserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
)

// Serve an embedded store and open it from another process's point of
// view: through the lakefs:// backend. The checksum is the store's own.
func ExampleNew() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "storeserver-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := local.Create(ctx, filepath.Join(dir, "shared-runs"), "main", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	srv, err := storeserver.New(ctx, st, &storeserver.Options{AccessKeyID: "AKIAEXAMPLE", SecretAccessKey: "example-secret"})
	if err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(srv) // or srv.Listen and srv.Serve
	defer hs.Close()

	// A worker sets LAKECTL_SERVER_ENDPOINT_URL, LAKECTL_CREDENTIALS_* and
	// opens lakefs://shared-runs with artifacts.Open; here in code:
	c, err := lakefs.NewClient(lakefs.Config{Endpoint: hs.URL, AccessKeyID: "AKIAEXAMPLE", SecretAccessKey: "example-secret"})
	if err != nil {
		log.Fatal(err)
	}
	worker, err := lakefs.Open(ctx, c, srv.Repository(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer worker.Close()
	put, err := worker.PutObject(ctx, "main", "data/prompts.jsonl", strings.NewReader(`{"prompt":"2+2"}`+"\n"), nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := worker.Commit(ctx, "main", "add prompts", nil); err != nil {
		log.Fatal(err)
	}

	rc, info, err := st.GetObject(ctx, "main", "data/prompts.jsonl")
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	fmt.Printf("lakefs://%s main:%s = %s", srv.Repository(), info.Path, b)
	fmt.Println("same checksum:", put.Checksum == info.Checksum)
	_, err = worker.GetBranch(ctx, "no-such-branch")
	fmt.Println("missing branch is ErrBranchNotFound:", errors.Is(err, artifacts.ErrBranchNotFound))
	// Output:
	// lakefs://shared-runs main:data/prompts.jsonl = {"prompt":"2+2"}
	// same checksum: true
	// missing branch is ErrBranchNotFound: true
}

// Serve until the context ends, as `rlpipe store serve` does.
func ExampleServer_Serve() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	st, err := artifacts.Open(ctx, "./.rlpipe", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	srv, err := storeserver.New(ctx, st, &storeserver.Options{
		Addr:            "0.0.0.0:8001", // any address but loopback needs credentials
		Repository:      "rlpipe",       // the embedded store's own name, ".rlpipe", is no repository name
		AccessKeyID:     os.Getenv(storeserver.EnvAccessKeyID),
		SecretAccessKey: os.Getenv(storeserver.EnvSecretAccessKey),
	})
	if err != nil {
		log.Fatal(err) // errors.Is(err, storeserver.ErrNeedCredentials) without them
	}
	l, err := srv.Listen(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("LAKECTL_SERVER_ENDPOINT_URL=http://%s RLPIPE_STORE=lakefs://%s\n", l.Addr(), srv.Repository())
	if err := srv.Serve(ctx, l); err != nil {
		log.Fatal(err)
	}
}

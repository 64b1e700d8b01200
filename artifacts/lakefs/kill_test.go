package lakefs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
)

// killingBody kills the process that sends it once after bytes have
// been read from it.
type killingBody struct {
	io.ReadCloser
	after int64
	read  int64
	kill  func()
}

func (k *killingBody) Read(p []byte) (int, error) {
	n, err := k.ReadCloser.Read(p)
	if k.read += int64(n); k.read >= k.after {
		k.kill()
	}
	return n, err
}

// TestKillDuringPresignedUpload kills (SIGKILL) a process putting a 24 MiB
// object through a presigned upload after 1 MiB has reached the block
// store: nothing is staged on the branch and no block waits to be
// linked. The same put again stores the file's bytes, through the block
// store, with the file's SHA-256.
func TestKillDuringPresignedUpload(t *testing.T) {
	backing := artifactstest.NewLocalNamed(t, "killed")
	bs, err := storeserver.NewBlockStore(storeserver.BlockStoreOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var child atomic.Pointer[os.Process]
	var killOnce sync.Once
	killing := atomic.Bool{}
	blocks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && killing.Load() {
			r.Body = &killingBody{ReadCloser: r.Body, after: 1 << 20, kill: func() {
				killOnce.Do(func() { child.Load().Kill() })
			}}
		}
		bs.ServeHTTP(w, r)
	}))
	t.Cleanup(blocks.Close)
	bs.SetURL(blocks.URL)
	srv, url := artifactstest.Serve(t, backing, &storeserver.Options{BlockStore: bs})

	data := content(24 << 20) // more than loopback sockets hold in flight: the kill stops the upload
	file := filepath.Join(t.TempDir(), "model-00001-of-00001.safetensors")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	put := func() (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), lakefs.EnvTestRole+"=put", lakefs.EnvTestRepo+"="+srv.Repository(), lakefs.EnvTestFile+"="+file, lakefs.EnvTestPath+"=w/model.safetensors",
			lakefs.EnvEndpoint+"="+url, lakefs.EnvAccessKeyID+"=", lakefs.EnvSecretAccessKey+"=", lakefs.EnvPresignThreshold+"=1MiB")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		child.Store(cmd.Process)
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%w (stderr: %s)", err, strings.TrimSpace(errOut.String()))
		}
		return strings.TrimSpace(out.String()), err
	}

	killing.Store(true)
	if _, err := put(); err == nil || !strings.Contains(err.Error(), "signal: killed") {
		t.Fatalf("the put was not killed: %v", err)
	}
	ctx := context.Background()
	for ch, err := range backing.DiffUncommitted(ctx, "main") {
		t.Errorf("staged after the kill: %+v, %v", ch, err)
	}
	if _, err := backing.StatObject(ctx, "main", "w/model.safetensors"); !errors.Is(err, artifacts.ErrObjectNotFound) {
		t.Errorf("stat after the kill: %v, want object not found", err)
	}
	if bs.Pending() != 0 || bs.Uploads() != 0 {
		t.Errorf("block store after the kill: %d pending, %d uploads; want none", bs.Pending(), bs.Uploads())
	}

	killing.Store(false)
	sum, err := put()
	if err != nil {
		t.Fatalf("the put again: %v", err)
	}
	want := artifactstest.SHA256Hex(data)
	if sum != want {
		t.Errorf("the put again answered checksum %s, want %s", sum, want)
	}
	got, info := artifactstest.ReadInfo(t, backing, "main", "w/model.safetensors")
	if !bytes.Equal(got, data) || info.Checksum != want {
		t.Errorf("stored %d bytes (equal: %v), checksum %s; want the file's %d bytes, %s", len(got), bytes.Equal(got, data), info.Checksum, len(data), want)
	}
	if bs.Uploads() != 1 || bs.Pending() != 0 {
		t.Errorf("block store: %d uploads, %d pending; want 1, 0", bs.Uploads(), bs.Pending())
	}
}

package temporaltests_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/rlpipe/rlpipe/pipeline/temporalrun"
)

// TestTemporalDevBadInput checks what `rlpipe temporal dev` refuses, each
// with exit 1 and one line naming the address and the way on.
func TestTemporalDevBadInput(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	inUse := busy.Addr().String()
	for _, tc := range []struct {
		name, addr, want string
	}{
		{"not loopback", "0.0.0.0:7233",
			`rlpipe: temporal dev: the dev server listens on loopback only: "0.0.0.0:7233" is not a loopback address; use 127.0.0.1:PORT here, and a Temporal cluster for workers on other hosts (docs/DEPLOY.md)` + "\n"},
		{"no port", "7233",
			`rlpipe: temporal dev: start the Temporal dev server: address "7233": address 7233: missing port in address (give HOST:PORT, e.g. 127.0.0.1:7233)` + "\n"},
		{"port not a number", "127.0.0.1:http",
			`rlpipe: temporal dev: start the Temporal dev server: address "127.0.0.1:http": port "http" is not a number from 0 to 65535` + "\n"},
		{"port in use", inUse,
			"rlpipe: temporal dev: start the Temporal dev server: listen on " + inUse + ": listen tcp " + inUse + ": bind: address already in use (another Temporal server? stop it, or pass another --addr)\n"},
	} {
		cmd := exec.Command(rlpipeBin, "temporal", "dev", "--addr", tc.addr)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || string(out) != tc.want {
			t.Errorf("%s: %v\n%s\nwant exit 1 and\n%s", tc.name, err, out, tc.want)
		}
	}
}

// TestTemporalDevStateFile starts the dev server on a state file twice:
// the first start creates the file and a workflow is started on it, the
// second opens it (its namespace already registered) and still knows the
// workflow; each stops on Ctrl-C with exit 0.
func TestTemporalDevStateFile(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "state", "dev.db")
	c := &cluster{t: t, dir: dir, env: os.Environ()}
	const id = "kept-across-restarts"
	for _, start := range []string{"first", "second"} {
		addr := freeAddr(t)
		p := c.startEnv("temporal dev", "temporal", "dev", "--addr", addr, "--db-file", db)
		p.waitOutput(t, "Temporal dev server on "+addr+", namespace default, state in "+db+" (Ctrl-C stops it)\n")
		tc, err := client.Dial(client.Options{HostPort: addr, Namespace: "default", Logger: temporalrun.Logger(zerolog.Nop())})
		if err != nil {
			t.Fatalf("%s start: dial %s: %v", start, addr, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if start == "first" {
			_, err = tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "nobody"}, "nothing")
		} else {
			_, err = tc.DescribeWorkflowExecution(ctx, id, "")
		}
		cancel()
		tc.Close()
		if err != nil {
			t.Fatalf("%s start: workflow %s: %v", start, id, err)
		}
		if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if err := p.wait(t); err != nil {
			t.Fatalf("%s start: exit %v after Ctrl-C; stderr:\n%s", start, err, p.stderr.String())
		}
		if fi, err := os.Stat(db); err != nil || fi.Size() == 0 {
			t.Fatalf("%s start: state file %s: %v", start, db, err)
		}
	}
}

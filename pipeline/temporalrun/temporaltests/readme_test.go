package temporaltests_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestReadmeManyMachines runs README.md's "Many machines" snippet as
// written, in a fresh directory holding examples/arithmetic, against the
// Temporal dev server it starts itself (`rlpipe temporal dev`). Only what a
// shared test machine needs changes: the pipeline runs 2 of its
// iterations, and the dev server and the store server listen on free
// ports instead of 7233 and 8001 (every mention of those addresses is
// rewritten, and TEMPORAL_ADDRESS moves the default). Lines ending in & start a background process, which the
// test waits for until it prints that it serves; export sets the
// variables of the lines after it; every other line must exit 0.
func TestReadmeManyMachines(t *testing.T) {
	lines := readmeSnippet(t, "../../../README.md", "## Many machines")
	dir := t.TempDir()
	pipeline, err := os.ReadFile("../../../examples/arithmetic/pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	short := regexp.MustCompile(`(?m)^iterations: \d+$`).ReplaceAll(pipeline, []byte("iterations: 2"))
	writeFile(t, filepath.Join(dir, "examples/arithmetic/pipeline.yaml"), short)
	reward, err := os.ReadFile("../../../examples/arithmetic/reward.yaml")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "examples/arithmetic/reward.yaml"), reward)

	temporalAddr, storeAddr := freeAddr(t), freeAddr(t)
	addrs := strings.NewReplacer("127.0.0.1:7233", temporalAddr, "127.0.0.1:8001", storeAddr)
	ready := map[string]string{
		"temporal dev": "Temporal dev server on " + temporalAddr,
		"store serve":  "serving store",
		"worker":       "rlpipe worker: serving",
	}
	listen := map[string]string{"temporal dev": temporalAddr, "store serve": storeAddr}
	c := &cluster{t: t, dir: dir}
	// The snippet's variables only: none of the host's rlpipe, lakectl or
	// Temporal settings.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RLPIPE_") && !strings.HasPrefix(kv, "LAKECTL_") && !strings.HasPrefix(kv, "TEMPORAL_") {
			c.env = append(c.env, kv)
		}
	}
	// Commands that leave --temporal out dial the default, which moves
	// with the dev server's port.
	c.env = append(c.env, "TEMPORAL_ADDRESS="+temporalAddr)
	var ran []string
	var dev *proc
	for _, line := range lines {
		line = addrs.Replace(line)
		background := strings.HasSuffix(line, "&")
		fields := strings.Fields(strings.TrimSuffix(line, "&"))
		if fields[0] == "export" {
			c.env = append(c.env, fields[1:]...)
			ran = append(ran, line)
			continue
		}
		if fields[0] != "rlpipe" {
			t.Fatalf("README line %q: the test runs rlpipe commands and export only", line)
		}
		args := fields[1:]
		cmdline := strings.Join(args, " ")
		if !background {
			cmd := exec.Command(rlpipeBin, args...)
			cmd.Dir, cmd.Env = dir, c.env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("README line %q (after %q): %v\n%s", line, ran, err, out)
			}
			ran = append(ran, line)
			if args[0] == "run" {
				if !strings.Contains(string(out), "run arith: iteration 2 of 2 committed as ") {
					t.Errorf("rlpipe run printed:\n%s\nwant the run's 2 iterations", out)
				}
			}
			continue
		}
		var name string
		for n := range ready {
			if strings.Contains(cmdline, n) {
				name = n
			}
		}
		if name == "" {
			t.Fatalf("README line %q: a background command the test does not know how to wait for", line)
		}
		if a, ok := listen[name]; ok && !strings.Contains(cmdline, "--addr") {
			args = append(args, "--addr", a)
		}
		p := c.startEnv(name, args...)
		p.waitOutput(t, ready[name])
		if name == "temporal dev" {
			dev = p
		}
		ran = append(ran, line)
	}
	if len(ran) != len(lines) || dev == nil {
		t.Fatalf("ran %d of the snippet's %d lines (the dev server among them: %v)", len(ran), len(lines), dev != nil)
	}
	// Ctrl-C stops the dev server cleanly, saying so in one line.
	if err := syscall.Kill(-dev.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := dev.wait(t); err != nil || dev.stderr.String() != "Temporal dev server on "+temporalAddr+" stopped\n" {
		t.Errorf("temporal dev after Ctrl-C: %v, stderr %q; want exit 0 and one line saying it stopped", err, dev.stderr.String())
	}
}

// startEnv is start with the cluster's env as the whole environment.
func (c *cluster) startEnv(name string, args ...string) *proc {
	c.t.Helper()
	return c.spawn(c.env, name, args...)
}

// readmeSnippet returns the lines of the first ```sh block after heading
// in the Markdown file, without comments and blank lines.
func readmeSnippet(t *testing.T, file, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no heading %q", file, heading)
	}
	_, after, ok = strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatalf("%s: no ```sh block after %q", file, heading)
	}
	block, _, _ := strings.Cut(after, "```")
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if i := strings.Index(l, "#"); i >= 0 {
			l = l[:i]
		}
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("%s: the ```sh block after %q is empty", file, heading)
	}
	return lines
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// freeAddr is a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprintf("127.0.0.1:%d", l.Addr().(*net.TCPAddr).Port)
}

package agent_test

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/sandbox"
)

// Two episodes of one world run at once; neither sees the other's writes,
// and the cached world sees neither.
func TestConcurrentEpisodesIsolated(t *testing.T) {
	for _, mode := range modes {
		t.Run(modeName(mode), func(t *testing.T) {
			_, w := newWorld(t)
			before := digest(t, w.Dir)
			ws1, ws2 := newWorkspace(t, w, mode), newWorkspace(t, w, mode)
			written := make(chan struct{})
			var wg sync.WaitGroup
			var out1, out2 string
			var fail1, fail2 string
			wg.Add(2)
			go func() {
				defer wg.Done()
				defer close(written)
				r, err := ws1.Run(t.Context(), "echo new > new.txt && echo changed > a.txt && rm b.txt && rm -r dir && ls", sandbox.Limits{})
				if err != nil || !r.Passed() {
					fail1 = strings.TrimSpace(r.Stderr) + errString(err)
				}
				out1 = r.Stdout
			}()
			go func() {
				defer wg.Done()
				<-written
				r, err := ws2.Run(t.Context(), "cat a.txt b.txt dir/c.txt; test -e new.txt || echo no new.txt; ls", sandbox.Limits{})
				if err != nil || !r.Passed() {
					fail2 = strings.TrimSpace(r.Stderr) + errString(err)
				}
				out2 = r.Stdout
			}()
			wg.Wait()
			if fail1 != "" || fail2 != "" {
				t.Fatalf("episode 1: %s; episode 2: %s", fail1, fail2)
			}
			if out1 != "a.txt\nnew.txt\n" {
				t.Errorf("episode 1 sees %q", out1)
			}
			if want := "alpha\nbeta\ngamma\nno new.txt\na.txt\nb.txt\ndir\n"; out2 != want {
				t.Errorf("episode 2 sees %q, want %q", out2, want)
			}
			// Episode 1's writes persist across its tool calls.
			if r := run(t, ws1, "cat a.txt new.txt"); r.Stdout != "changed\nnew\n" {
				t.Errorf("episode 1's second call sees %q", r.Stdout)
			}
			if got := digest(t, w.Dir); got != before {
				t.Fatal("the cached world changed")
			}
			root := ws1.Root()
			if err := ws1.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(root); !os.IsNotExist(err) {
				t.Errorf("workspace %s still exists after Close: %v", root, err)
			}
			if mounted(t, filepath.Dir(root)) {
				t.Errorf("workspace %s still mounted after Close", root)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Tool calls cannot write outside their workspace, whatever path they take.
func TestEscapesFail(t *testing.T) {
	c, w := newWorld(t)
	before := digest(t, w.Dir)
	hostMarker := filepath.Join(t.TempDir(), "host-marker")
	for _, cc := range []struct{ name, script string }{
		{"write /etc", "echo x > /etc/rlpipe-escape"},
		{"write the cached world", "echo x > " + w.Dir + "/a.txt"},
		{"add to the cached world", "echo x > " + w.Dir + "/new.txt"},
		{"write the cache dir", "echo x > " + c.Dir() + "/evil"},
		{"write a host temp dir", "echo x > " + hostMarker},
		{"cd above the root", "cd ../../../.. && test \"$(pwd)\" = / && echo x > escape"},
		{"symlink into the world cache", "ln -s " + w.Dir + "/a.txt link && echo x > link"},
		{"symlink to /", "ln -s / up && echo x > up/etc/rlpipe-escape"},
		{"symlink with dot-dots", "ln -s ../../../../../etc up && echo x > up/rlpipe-escape"},
		{"hard link to a host file", "ln /etc/passwd passwd && echo x >> passwd"},
		{"mount", "mkdir -p m && mount -t tmpfs none m"},
		{"chroot back out", "/usr/sbin/chroot / true"},
	} {
		t.Run(cc.name, func(t *testing.T) {
			ws := newWorkspace(t, w, agent.ModeAuto)
			r := run(t, ws, cc.script)
			t.Logf("%s: %s", r.Status, strings.TrimSpace(r.Stderr))
			if r.Passed() {
				t.Fatalf("%q passed: %+v", cc.script, r)
			}
		})
	}
	if got := digest(t, w.Dir); got != before {
		t.Fatal("the cached world changed")
	}
	for _, p := range []string{"/etc/rlpipe-escape", c.Dir() + "/evil", hostMarker} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists on the host", p)
		}
	}
}

// A tool call cannot reach a server on the host's loopback.
func TestNoNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	// The server is reachable from the host.
	if c, err := net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatal(err)
	} else {
		c.Close()
	}
	_, w := newWorld(t)
	ws := newWorkspace(t, w, agent.ModeAuto)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	r := run(t, ws, "exec 3<>/dev/tcp/127.0.0.1/"+port+" && echo connected")
	if r.Passed() || strings.Contains(r.Stdout, "connected") {
		t.Fatalf("the sandbox reached the host's loopback: %+v", r)
	}
	if !strings.Contains(r.Stderr, "unreachable") && !strings.Contains(r.Stderr, "refused") {
		t.Errorf("stderr %q does not say the network is unreachable", r.Stderr)
	}
	time.Sleep(50 * time.Millisecond)
	if n := accepted.Load(); n != 1 {
		t.Fatalf("the server accepted %d connections, want 1 (the host's)", n)
	}
}

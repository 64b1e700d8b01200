package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// These tests drive the choice between cgroup v2, v1 and the rlimit
// fallback from fake hierarchies: directories in t.TempDir() holding the
// files the kernel's would. They show what detectIn reads and writes,
// not that the kernel accepts it: the limits through cgroup v2 need a
// delegated hierarchy, which the machine these were written on lacks.

func TestParseOwnCgroups(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     map[string]string
	}{
		{"v2 only", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/run.scope\n",
			map[string]string{"": "/user.slice/user-1000.slice/user@1000.service/app.slice/run.scope"}},
		{"hybrid", "9:name=systemd:/\n8:pids:/\n4:memory:/job/42\n2:cpu,cpuacct:/\n0::/\n",
			map[string]string{"name=systemd": "/", "pids": "/", "memory": "/job/42", "cpu": "/", "cpuacct": "/", "": "/"}},
		{"a path with a colon", "0::/a:b\n", map[string]string{"": "/a:b"}},
		{"garbage lines", "nonsense\n\n0::/x\n", map[string]string{"": "/x"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := parseOwnCgroups([]byte(c.in)); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestParseCgroupMounts(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     map[string]string
	}{
		{"v2 only", "25 1 0:22 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n",
			map[string]string{"cgroup2": "/sys/fs/cgroup"}},
		{"hybrid", "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n" +
			"35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n" +
			"39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n" +
			"41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
			map[string]string{"cpuacct": "/sys/fs/cgroup/cpu,cpuacct", "memory": "/sys/fs/cgroup/memory",
				"pids": "/sys/fs/cgroup/pids", "cgroup2": "/sys/fs/cgroup/unified"}},
		{"a subtree bound elsewhere is not a hierarchy's root", "50 1 0:22 /job /mnt/cg rw - cgroup2 cgroup2 rw\n",
			map[string]string{}},
		{"other file systems", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n", map[string]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseCgroupMounts(strings.NewReader(c.in))
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

// fakeFiles writes files (path: content) under root.
func fakeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDetectInFakeHierarchies(t *testing.T) {
	v1 := map[string]string{"memory/job/x": "", "pids/x": "", "cpuacct/x": ""}
	v1Own := map[string]string{"memory": "/job", "pids": "/", "cpuacct": "/", "": "/"}
	// v2In is a v2 maker in the cgroup dir below the fake root; v1Job the
	// v1 maker of the v1 files' own groups.
	v2In := func(dir string) func(root string) detected {
		return func(root string) detected { return detected{maker: v2Maker{parent: filepath.Join(root, dir)}} }
	}
	v1Job := func(root string) detected {
		return detected{maker: v1Maker{memory: filepath.Join(root, "memory/job"), pids: filepath.Join(root, "pids"), cpuacct: filepath.Join(root, "cpuacct")}}
	}
	for _, c := range []struct {
		name  string
		files map[string]string
		dirs  []string // made as directories, not files
		own   map[string]string
		v2    bool // a cgroup2 mount at root/unified
		v1    bool // memory, pids and cpuacct mounts at root/…
		want  func(root string) detected
		// subtree is cgroup.subtree_control of the v2 cgroup afterwards, when checked
		subtree string
	}{
		{name: "v2 delegated: controllers given to children",
			files: map[string]string{"unified/app.scope/cgroup.controllers": "cpuset cpu io memory pids\n",
				"unified/app.scope/cgroup.subtree_control": ""},
			own: map[string]string{"": "/app.scope"}, v2: true,
			want:    v2In("unified/app.scope"),
			subtree: "+memory +pids"},
		{name: "v2 delegated, controllers already given",
			files: map[string]string{"unified/app.scope/cgroup.controllers": "memory pids\n",
				"unified/app.scope/cgroup.subtree_control": "memory pids\n"},
			own: map[string]string{"": "/app.scope"}, v2: true,
			want:    v2In("unified/app.scope"),
			subtree: "memory pids\n"},
		{name: "v2 that cannot give controllers to children",
			files: map[string]string{"unified/cgroup.controllers": "memory pids\n"},
			dirs:  []string{"unified/cgroup.subtree_control"}, // any write fails
			own:   map[string]string{"": "/"}, v2: true,
			want: func(root string) detected {
				return detected{why: "cgroup v2 at " + filepath.Join(root, "unified") + ": write +memory +pids to " +
					filepath.Join(root, "unified/cgroup.subtree_control") + ": open " + filepath.Join(root, "unified/cgroup.subtree_control") +
					": is a directory (a cgroup that holds processes cannot give controllers to children: " +
					"run rlpipe in a delegated cgroup of its own, e.g. systemd-run --scope -p Delegate=yes); cgroup v1: no memory hierarchy is mounted"}
			}},
		{name: "v2 without pids delegated, v1 usable",
			files: merge(v1, map[string]string{"unified/cgroup.controllers": "cpu memory\n"}),
			own:   merge(v1Own, map[string]string{"": "/"}), v2: true, v1: true,
			want: v1Job},
		{name: "hybrid: v2 without controllers, v1 usable",
			files: merge(v1, map[string]string{"unified/cgroup.controllers": ""}),
			own:   v1Own, v2: true, v1: true,
			want: v1Job},
		{name: "none",
			own: map[string]string{"": "/"},
			want: func(string) detected {
				return detected{why: "no cgroup v2 mount; cgroup v1: no memory hierarchy is mounted"}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			fakeFiles(t, root, c.files)
			for _, d := range c.dirs {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			mounts := map[string]string{}
			if c.v2 {
				mounts["cgroup2"] = filepath.Join(root, "unified")
			}
			if c.v1 {
				for _, ctl := range []string{"memory", "pids", "cpuacct"} {
					mounts[ctl] = filepath.Join(root, ctl)
				}
			}
			got := detectIn(c.own, mounts)
			if want := c.want(root); !reflect.DeepEqual(got, want) {
				t.Fatalf("detectIn\n got %+v\nwant %+v", got, want)
			}
			if c.subtree != "" {
				b, _ := os.ReadFile(filepath.Join(root, "unified/app.scope/cgroup.subtree_control"))
				if string(b) != c.subtree {
					t.Errorf("cgroup.subtree_control holds %q, want %q", b, c.subtree)
				}
			}
		})
	}
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// A v2 group's limits: memory without swap, and Procs plus bwrap's own
// process.
func TestV2GroupLimits(t *testing.T) {
	parent := t.TempDir()
	g, err := v2Maker{parent: parent}.make(Limits{MemoryBytes: 256 << 20, Procs: 8})
	if err != nil {
		t.Fatal(err)
	}
	dir := g.(*v2Group).dir
	if !strings.HasPrefix(filepath.Base(dir), groupPrefix) || filepath.Dir(dir) != parent {
		t.Fatalf("group %s, want %s/%s…", dir, parent, groupPrefix)
	}
	for file, want := range map[string]string{"memory.max": "268435456", "pids.max": "9"} {
		if b, _ := os.ReadFile(filepath.Join(dir, file)); string(b) != want {
			t.Errorf("%s holds %q, want %q", file, b, want)
		}
	}
	fakeFiles(t, dir, map[string]string{"memory.events": "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n",
		"cpu.stat": "usage_usec 1500000\nuser_usec 1000000\n"})
	if !g.memoryExceeded() {
		t.Error("memoryExceeded is false with oom_kill 1")
	}
	if d, ok := g.cpuUsed(); !ok || d.Seconds() != 1.5 {
		t.Errorf("cpuUsed = %v, %v; want 1.5s", d, ok)
	}
}

// The v2 start — bwrap cloned into its group, so it is there before it
// runs — on a real cgroup v2 hierarchy when this process may make a
// cgroup in one, even one without controllers (as in a hybrid layout):
// the clone needs no controller, the limits do.
func TestV2GroupStartsTheProcessInIt(t *testing.T) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skip(err)
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	mounts, _ := parseCgroupMounts(f)
	root, ok := mounts["cgroup2"]
	if !ok {
		t.Skip("no cgroup v2 hierarchy is mounted")
	}
	g := &v2Group{dir: filepath.Join(root, parseOwnCgroups(b)[""], groupName())}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		t.Skipf("cannot make a cgroup v2 here: %v", err)
	}
	defer g.remove()
	out := outputIn(t, g, "/bin/cat", "/proc/self/cgroup")
	if want := "0::" + strings.TrimPrefix(g.dir, root) + "\n"; !strings.Contains(string(out), want) {
		t.Fatalf("the process's cgroups:\n%s\nwant the line %q", out, want)
	}
}

// The v1 start: a shell writes its own pid to the group's cgroup.procs
// files, here plain files, and then becomes the command, which is the
// same process.
func TestV1GroupStartsTheProcessInIt(t *testing.T) {
	root := t.TempDir()
	g := &v1Group{memory: filepath.Join(root, "memory"), pids: filepath.Join(root, "pids")}
	fakeFiles(t, root, map[string]string{"memory/cgroup.procs": "", "pids/cgroup.procs": ""})
	out := outputIn(t, g, "/bin/sh", "-c", "echo $$")
	for _, d := range g.dirs() {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if string(b) != string(out) || len(out) < 2 {
			t.Errorf("%s/cgroup.procs holds %q; the command's pid is %q", d, b, out)
		}
	}
}

// outputIn runs the command args started as the group g starts a sandbox
// and returns its standard output.
func outputIn(t *testing.T, g group, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	started, err := g.prepare(cmd)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.Output()
	started()
	if err != nil {
		t.Fatalf("%s in the group: %v", args[0], err)
	}
	return out
}

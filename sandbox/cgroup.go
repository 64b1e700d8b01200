package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// Limits for the sandbox as a whole.
//
// rlimits bind each process: with a 512 MiB RLIMIT_AS, eight children
// hold eight times that. Where the machine lets this process make cgroups,
// each run gets one, holding every process of the sandbox, and its limits
// bind them together:
//
//   - memory: MemoryBytes for all processes together, swap included; the
//     kernel's OOM killer ends a process past it and the run reads
//     StatusMemory;
//   - processes: Procs tasks together (pids controller);
//   - CPU: CPUTime for all processes together, read from the group's
//     accounting every cgroupPoll; the run is killed past it and reads
//     StatusTimeout.
//
// The rlimits stay, per process, under the group's limits.
//
// bwrap starts in the group (prepare): every process of the sandbox is
// in it from its first instruction, so a sandbox left running by a
// killed rlpipe — bwrap's parent-death signal can be lost while it sets
// up, where bwrap has no PID namespace of its own (see pidNamespace) — is
// in a group too, and the next start kills it (sweepGroups).
//
// What is usable is found once per process (detectGroups): cgroup v2
// first, at this process's own cgroup, when its memory and pids
// controllers can be given to a child (a delegated cgroup, e.g. a systemd
// unit with Delegate=yes, or a container's own namespace); else cgroup v1
// memory and pids hierarchies (and cpuacct when present) that this
// process may write; else none. Without one the limits are the rlimits
// alone, and the first run logs a warning saying so: memory at most
// MemoryBytes of address space per process and Procs processes, so
// MemoryBytes × Procs for the sandbox; CPUTime per process. Enforcement
// says which is in force.

// cgroupPoll is how often the CPU budget of a group is read.
const cgroupPoll = 50 * time.Millisecond

// A group bounds a sandbox as a whole (a cgroup): every process the
// sandbox starts is in it.
type group interface {
	// prepare makes cmd start in the group: bwrap, and so every process
	// it starts, is in it before it runs. started is called once cmd has
	// started (or failed to).
	prepare(cmd *exec.Cmd) (started func(), err error)
	// memoryExceeded reports whether the group killed a process at its
	// memory limit.
	memoryExceeded() bool
	// cpuUsed is the CPU time the group's processes used; ok is false when
	// the group does not count it.
	cpuUsed() (d time.Duration, ok bool)
	// remove deletes the group once the sandbox is gone.
	remove()
}

// groupMaker makes a run's group, or is nil when no cgroup is usable.
type groupMaker interface {
	make(lim Limits) (group, error)
	// dirs are the directories the runs' groups are made in.
	dirs() []string
	String() string
}

// detected is what detectGroups found: the maker, or why there is none.
type detected struct {
	maker groupMaker
	why   string
}

var (
	detectOnce sync.Once
	detection  detected
	warnOnce   sync.Once
	// testNoCgroup forces the rlimit fallback, for the tests of what it
	// promises.
	testNoCgroup bool
)

func groups() detected {
	detectOnce.Do(func() { detection = detectGroups() })
	if testNoCgroup {
		return detected{why: "turned off by a test"}
	}
	return detection
}

// Enforcement says how Limits are enforced on this machine: per sandbox
// by a cgroup (and which), or per process by rlimits alone, and why.
func Enforcement() string {
	d := groups()
	if d.maker != nil {
		return "per sandbox: " + d.maker.String() + "; and per process: rlimits"
	}
	return "per process only: rlimits (memory: RLIMIT_AS per process, so up to MemoryBytes × Procs per sandbox; " +
		"processes: RLIMIT_NPROC; CPU: RLIMIT_CPU per process); no cgroup: " + d.why
}

// PerSandbox reports whether a cgroup bounds each sandbox as a whole.
func PerSandbox() bool { return groups().maker != nil }

// newGroup makes the run's group, or returns nil when no cgroup is
// usable, logging once that the fallback is in force.
func newGroup(ctx context.Context, lim Limits) (group, error) {
	d := groups()
	if d.maker == nil {
		warnOnce.Do(func() {
			zerolog.Ctx(ctx).Warn().Str("enforcement", Enforcement()).
				Msg("sandbox: limits bind each process, not each sandbox as a whole")
		})
		return nil, nil
	}
	g, err := d.maker.make(lim)
	if err != nil {
		return nil, fmt.Errorf("create the sandbox's cgroup (%s): %v: %w", d.maker, err, ErrInfra)
	}
	return g, nil
}

// groupSeq numbers the groups of this process.
var groupSeq atomic.Int64

// groupPrefix starts the names of the runs' cgroups.
const groupPrefix = "rlpipe-sbx-p"

func groupName() string {
	return groupPrefix + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(groupSeq.Add(1), 10)
}

func detectGroups() detected {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return detected{why: fmt.Sprintf("read /proc/self/cgroup: %v", err)}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return detected{why: fmt.Sprintf("read /proc/self/mountinfo: %v", err)}
	}
	defer f.Close()
	own := parseOwnCgroups(b)
	mounts, err := parseCgroupMounts(f)
	if err != nil {
		return detected{why: fmt.Sprintf("read /proc/self/mountinfo: %v", err)}
	}
	return detectIn(own, mounts)
}

// detectIn chooses how to bound a sandbox, given this process's cgroup
// per controller and the hierarchies' mount points: cgroup v2 where its
// memory and pids controllers are delegated, else cgroup v1, else none
// (why says what each lacked). It sweeps the groups killed processes
// left in the chosen directories.
func detectIn(own, mounts map[string]string) detected {
	var whys []string
	if root, ok := mounts["cgroup2"]; ok {
		dir := filepath.Join(root, own[""])
		m, err := probeV2(dir)
		if err == nil {
			sweepGroups(dir)
			return detected{maker: m}
		}
		whys = append(whys, "cgroup v2 at "+dir+": "+err.Error())
	} else {
		whys = append(whys, "no cgroup v2 mount")
	}
	m, err := probeV1(own, mounts)
	if err == nil {
		for _, d := range m.dirs() {
			sweepGroups(d)
		}
		return detected{maker: m}
	}
	whys = append(whys, "cgroup v1: "+err.Error())
	return detected{why: strings.Join(whys, "; ")}
}

// parseOwnCgroups reads a process's cgroup per controller from the text
// of /proc/PID/cgroup ("hierarchy:controllers:path" lines); the key ""
// is the v2 hierarchy's.
func parseOwnCgroups(b []byte) map[string]string {
	own := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	return own
}

// parseCgroupMounts reads from /proc/PID/mountinfo the mount point of
// each cgroup hierarchy mounted at its root: "cgroup2", or a v1
// controller's name (memory, pids, cpuacct).
func parseCgroupMounts(r io.Reader) (map[string]string, error) {
	mounts := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 || pf[3] != "/" {
			continue // not a hierarchy's root
		}
		switch qf[0] {
		case "cgroup2":
			mounts["cgroup2"] = pf[4]
		case "cgroup":
			for _, opt := range strings.Split(qf[2], ",") {
				if opt == "memory" || opt == "pids" || opt == "cpuacct" {
					mounts[opt] = pf[4]
				}
			}
		}
	}
	return mounts, sc.Err()
}

// write writes a value to a cgroup file.
func write(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("write %s to %s: %w", value, filepath.Join(dir, file), err)
	}
	return nil
}

// readKey reads the number after key in a flat-keyed cgroup file
// ("oom_kill 3").
func readKey(path, key string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// removeGroup removes a cgroup directory once its last process is gone.
// The sandbox's init may still be exiting when bwrap has: try a few times.
func removeGroup(dir string) {
	for i := 0; i < 50; i++ {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) || !errors.Is(err, syscall.EBUSY) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sweepGroups removes the run cgroups under dir whose rlpipe process is
// gone (killed): it kills what is still in them first — a sandbox whose
// init outlived a killed rlpipe — and then removes them. Groups of live
// rlpipe processes are not touched.
func sweepGroups(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), groupPrefix)
		if !e.IsDir() || !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		killGroup(filepath.Join(dir, e.Name()))
	}
}

// killGroup kills every process in the cgroup dir and removes it. v1 has
// no cgroup.kill: a process forked after cgroup.procs was read is killed
// in the next round.
func killGroup(dir string) {
	_ = write(dir, "cgroup.kill", "1") // v2
	for i := 0; i < 50; i++ {
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			for _, f := range strings.Fields(string(b)) {
				if p, err := strconv.Atoi(f); err == nil && p > 1 {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
			}
		}
		err := syscall.Rmdir(dir)
		if err == nil || !errors.Is(err, syscall.EBUSY) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tryMake returns m once it has made, limited and removed a group with
// the default limits; else the zero maker and why not.
func tryMake[M groupMaker](m M) (M, error) {
	g, err := m.make(Limits{MemoryBytes: DefaultMemoryBytes, Procs: DefaultProcs})
	if err != nil {
		var zero M
		return zero, err
	}
	g.remove()
	return m, nil
}

// cgroup v2.

type v2Maker struct{ parent string }

func (m v2Maker) String() string { return "cgroup v2 (memory, pids, cpu accounting) under " + m.parent }

func (m v2Maker) dirs() []string { return []string{m.parent} }

// probeV2 checks that children of dir can have memory and pids limits,
// enabling the controllers for dir's children if needed, and that one can
// be made and limited.
func probeV2(dir string) (v2Maker, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return v2Maker{}, err
	}
	have := strings.Fields(string(b))
	for _, c := range []string{"memory", "pids"} {
		if !slices.Contains(have, c) {
			return v2Maker{}, fmt.Errorf("the %s controller is not delegated here (cgroup.controllers: %q)", c, strings.TrimSpace(string(b)))
		}
	}
	sub, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if !slices.Contains(strings.Fields(string(sub)), "memory") || !slices.Contains(strings.Fields(string(sub)), "pids") {
		if err := write(dir, "cgroup.subtree_control", "+memory +pids"); err != nil {
			return v2Maker{}, fmt.Errorf("%v (a cgroup that holds processes cannot give controllers to children: "+
				"run rlpipe in a delegated cgroup of its own, e.g. systemd-run --scope -p Delegate=yes)", err)
		}
	}
	return tryMake(v2Maker{parent: dir})
}

func (m v2Maker) make(lim Limits) (group, error) {
	dir := filepath.Join(m.parent, groupName())
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	g := &v2Group{dir: dir}
	limits := [][2]string{{"memory.max", strconv.FormatInt(lim.MemoryBytes, 10)}, {"pids.max", groupProcs(lim)}}
	if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
		limits = append(limits, [2]string{"memory.swap.max", "0"})
	}
	for _, kv := range limits {
		if err := write(dir, kv[0], kv[1]); err != nil {
			g.remove()
			return nil, err
		}
	}
	return g, nil
}

type v2Group struct{ dir string }

// prepare has the kernel clone bwrap into the group (CLONE_INTO_CGROUP,
// Linux 5.7).
func (g *v2Group) prepare(cmd *exec.Cmd) (func(), error) {
	f, err := os.Open(g.dir)
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = int(f.Fd())
	return func() { f.Close() }, nil
}

func (g *v2Group) memoryExceeded() bool {
	n, _ := readKey(filepath.Join(g.dir, "memory.events"), "oom_kill")
	return n > 0
}

func (g *v2Group) cpuUsed() (time.Duration, bool) {
	us, ok := readKey(filepath.Join(g.dir, "cpu.stat"), "usage_usec")
	return time.Duration(us) * time.Microsecond, ok
}

func (g *v2Group) remove() {
	_ = write(g.dir, "cgroup.kill", "1") // anything left (there should be nothing)
	removeGroup(g.dir)
}

// groupProcs is a group's process limit: Procs, and bwrap's own process
// outside the sandbox, which is in the group too.
func groupProcs(lim Limits) string { return strconv.Itoa(lim.Procs + 1) }

// cgroup v1.

type v1Maker struct{ memory, pids, cpuacct string } // parent directories; cpuacct may be ""

func (m v1Maker) String() string {
	s := "cgroup v1 (memory under " + m.memory + ", pids under " + m.pids
	if m.cpuacct != "" {
		s += ", cpuacct under " + m.cpuacct
	}
	return s + ")"
}

func (m v1Maker) dirs() []string {
	out := []string{m.memory, m.pids}
	if m.cpuacct != "" {
		out = append(out, m.cpuacct)
	}
	return out
}

// probeV1 finds this process's memory, pids and cpuacct cgroups and checks
// that a child can be made and limited in the first two.
func probeV1(own, mounts map[string]string) (v1Maker, error) {
	var m v1Maker
	for _, c := range []string{"memory", "pids"} {
		root, ok := mounts[c]
		if !ok {
			return v1Maker{}, fmt.Errorf("no %s hierarchy is mounted", c)
		}
		dir := filepath.Join(root, own[c])
		if c == "memory" {
			m.memory = dir
		} else {
			m.pids = dir
		}
	}
	if root, ok := mounts["cpuacct"]; ok {
		dir := filepath.Join(root, own["cpuacct"])
		probe := filepath.Join(dir, groupName())
		if os.Mkdir(probe, 0o755) == nil {
			m.cpuacct = dir
			syscall.Rmdir(probe)
		}
	}
	return tryMake(m)
}

func (m v1Maker) make(lim Limits) (group, error) {
	name := groupName()
	g := &v1Group{memory: filepath.Join(m.memory, name), pids: filepath.Join(m.pids, name)}
	if m.cpuacct != "" {
		g.cpuacct = filepath.Join(m.cpuacct, name)
	}
	for _, d := range g.dirs() {
		if err := os.Mkdir(d, 0o755); err != nil {
			g.remove()
			return nil, err
		}
	}
	mem := strconv.FormatInt(lim.MemoryBytes, 10)
	limits := [][3]string{{g.memory, "memory.limit_in_bytes", mem}, {g.pids, "pids.max", groupProcs(lim)}}
	if _, err := os.Stat(filepath.Join(g.memory, "memory.memsw.limit_in_bytes")); err == nil {
		// Memory and swap together; set after memory.limit_in_bytes, which it may not be below.
		limits = append(limits, [3]string{g.memory, "memory.memsw.limit_in_bytes", mem})
	}
	for _, l := range limits {
		if err := write(l[0], l[1], l[2]); err != nil {
			g.remove()
			return nil, err
		}
	}
	return g, nil
}

type v1Group struct{ memory, pids, cpuacct string }

func (g *v1Group) dirs() []string {
	out := []string{g.memory, g.pids}
	if g.cpuacct != "" {
		out = append(out, g.cpuacct)
	}
	return out
}

// enterThenExec is a shell that writes its own pid to each file before
// "--", then executes what follows.
const enterThenExec = `while [ "$1" != -- ]; do echo $$ >"$1" || exit 125; shift; done; shift; exec "$@"`

// prepare starts bwrap through /bin/sh, which moves itself into the
// group and then becomes bwrap: v1 cannot clone into a cgroup, and Go
// runs nothing of the caller's between fork and exec. The shell runs as
// the sandbox's user, as bwrap does: the group's cgroup.procs are given
// to that user.
func (g *v1Group) prepare(cmd *exec.Cmd) (func(), error) {
	args := []string{"sh", "-c", enterThenExec, "sh"}
	uid, gid := SandboxUID()
	for _, d := range g.dirs() {
		procs := filepath.Join(d, "cgroup.procs")
		if uid != os.Geteuid() {
			if err := os.Chown(procs, uid, gid); err != nil {
				return nil, err
			}
		}
		args = append(args, procs)
	}
	cmd.Args = append(append(args, "--", cmd.Path), cmd.Args[1:]...)
	cmd.Path = "/bin/sh"
	return func() {}, nil
}

func (g *v1Group) memoryExceeded() bool {
	n, _ := readKey(filepath.Join(g.memory, "memory.oom_control"), "oom_kill")
	return n > 0
}

func (g *v1Group) cpuUsed() (time.Duration, bool) {
	if g.cpuacct == "" {
		return 0, false
	}
	b, err := os.ReadFile(filepath.Join(g.cpuacct, "cpuacct.usage"))
	if err != nil {
		return 0, false
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(ns), err == nil
}

func (g *v1Group) remove() {
	for _, d := range g.dirs() {
		removeGroup(d)
	}
}

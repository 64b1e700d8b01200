package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/rlpipe/rlpipe/internal/scratch"
)

// Spec describes one sandboxed run.
type Spec struct {
	// Command is the argv run inside the sandbox, looked up in the
	// sandbox's PATH, e.g. {"python3", "test.py"}.
	Command []string
	// Files are written into the private workspace (/work, the working
	// directory) before the run. Names are relative, slash-separated and
	// stay inside the workspace: "solution.py", "tests/test_a.py". Files
	// are readable and writable, not executable: run scripts through their
	// interpreter.
	Files map[string][]byte
	// Stdin is the program's standard input; nil reads as empty.
	Stdin []byte
	// Env holds the only variables the program sees besides
	// PATH=/usr/local/bin:/usr/bin:/bin, HOME=/work and LANG=C.UTF-8,
	// which it may override, and PWD=/work.
	Env map[string]string
	// Limits bound the run; zero fields mean the defaults.
	Limits Limits
	// ReadOnlyBinds are host paths made visible read-only at the same path,
	// besides the defaults (see DefaultBinds). They may not hide /work,
	// /tmp, /proc or /dev.
	ReadOnlyBinds []string
	// ReadOnlyMounts are host directories or files made visible read-only
	// at another path: sandbox path → host path. They serve a host path
	// that the sandbox's own directories would hide, such as a venv under
	// /work or /tmp, mounted at /python/venv. A sandbox path follows the
	// rule of ReadOnlyFiles: a clean absolute path whose top-level
	// directory ("/python") is new, and not one of ReadOnlyFiles'; it may
	// be that directory itself ("/app").
	ReadOnlyMounts map[string]string
	// Mounts are host directories made visible writable at another path:
	// sandbox path → host path, under the rules of ReadOnlyMounts (a new
	// top-level directory, not shared with ReadOnlyFiles'). What the
	// program writes there stays on the host, as in RunIn's /work: the
	// Harbor environments (environments/harbor) give a task's /app and
	// its verifier's /logs/verifier this way. The sandbox's user must own
	// what it is to change there.
	Mounts map[string]string
	// ReadOnlyFiles are files the program can read but not change, remove
	// or replace, by absolute path in the sandbox outside /work:
	// "/check/expected.txt". Each top-level directory ("/check") is new
	// and read-only; it may not be one of the sandbox's own (/work, /tmp,
	// /proc, /dev) or of DefaultBinds and ReadOnlyBinds. Keep what a
	// checker needs here, never in Files: see docs/REWARDS.md.
	ReadOnlyFiles map[string][]byte
	// Verdict opens a channel for the program's verdict: a pipe whose path
	// is in the variable RLPIPE_VERDICT (EnvVerdict). What the program
	// writes there (up to VerdictBytes) is Result.Verdict. A checker
	// reports its verdict this way rather than by its exit code; only run
	// code that may write the verdict in such a sandbox.
	Verdict bool
	// Bwrap is the bubblewrap binary; "" means "bwrap" from PATH.
	Bwrap string
}

// DefaultBinds are the host paths every sandbox sees read-only, those that
// exist on the host: the system's programs and libraries, and the few files
// of /etc that the dynamic linker and common tools read. A symlink (/bin on
// a merged-/usr system) is recreated as the same symlink.
var DefaultBinds = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/localtime", "/etc/passwd", "/etc/group",
}

// nobody is the uid and gid that bwrap runs as when Run is called by root:
// RLIMIT_NPROC does not bind root, so the process limit needs another user.
const nobody = 65534

// DefaultPath is the PATH a sandboxed program sees unless Spec.Env sets
// another.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// Run runs s.Command in a new sandbox and waits for it.
//
// The returned error is non-nil only when no verdict exists: the Spec is
// invalid (ErrInvalid), the sandbox could not start (ErrInfra), or ctx ended
// (the Result then has StatusCanceled). A program that fails, crashes or
// passes a limit is a Result with a nil error.
func Run(ctx context.Context, s Spec) (Result, error) {
	if err := s.validate(); err != nil {
		return Result{}, err
	}
	lim := s.Limits.withDefaults()
	if err := checkFileSizes(s.Files, lim.FileBytes); err != nil {
		return Result{}, err
	}
	t, err := findTools(s)
	if err != nil {
		return Result{}, err
	}
	work, fds, cleanup, err := stageWorkspace(ctx, s.Files)
	defer cleanup()
	if err != nil {
		return Result{}, err
	}
	return launch(ctx, s, lim, t, workspaceTmpfs, work, fds)
}

// workspaceTmpfs are the private tmpfs of Run and Start.
var workspaceTmpfs = []string{"/dev/shm", "/tmp", "/work"}

// stageWorkspace stages files for bwrap to copy into the sandbox's /work:
// the bwrap arguments, the files they number, and a cleanup the caller
// always calls once bwrap has started (or failed to).
func stageWorkspace(ctx context.Context, files map[string][]byte) (work []string, fds *fdSet, cleanup func(), err error) {
	fds = &fdSet{}
	sweepStaging(ctx)
	ws, err := scratch.Mkdir("", stagingPrefix)
	if err != nil {
		return nil, fds, func() {}, fmt.Errorf("create workspace: %v: %w", err, ErrInfra)
	}
	names, opened, err := stage(ws.Path(), files)
	cleanup = func() {
		closeAll(opened)
		ws.Remove()
	}
	if err != nil {
		return nil, fds, cleanup, err
	}
	for i, name := range names {
		dest := path.Join("/work", name)
		if d := path.Dir(dest); d != "/work" {
			work = append(work, "--dir", d)
		}
		work = append(work, "--perms", "0644", "--file", strconv.Itoa(fds.add(opened[i])), dest)
	}
	return work, fds, cleanup, nil
}

// stagingPrefix starts the names of Run's staging directories in the
// temporary folder; those of killed processes are swept (internal/scratch).
const stagingPrefix = "rlpipe-sandbox-"

var sweepOnce sync.Once

// sweepStaging removes, once per process, the staging directories that
// killed processes left behind.
func sweepStaging(ctx context.Context) {
	sweepOnce.Do(func() {
		removed, err := scratch.Sweep("", stagingPrefix)
		log := zerolog.Ctx(ctx)
		if len(removed) > 0 {
			log.Info().Int("removed", len(removed)).Msg("sandbox: removed the staging directories of killed processes")
		}
		if err != nil {
			log.Warn().Err(err).Msg("sandbox: could not sweep old staging directories")
		}
	})
}

// tools are what a launch needs found first: bwrap, prlimit and the
// read-only bind arguments.
type tools struct {
	bwrap, prlimit string
	binds          []string
}

func findTools(s Spec) (tools, error) {
	bwrap, err := lookBwrap(s.Bwrap)
	if err != nil {
		return tools{}, err
	}
	prlimit, err := lookPrlimit()
	if err != nil {
		return tools{}, err
	}
	binds, err := bindArgs(s.ReadOnlyBinds, s.ReadOnlyMounts)
	if err != nil {
		return tools{}, err
	}
	for _, p := range slices.Sorted(maps.Keys(s.Mounts)) {
		if fi, err := os.Stat(s.Mounts[p]); err != nil || !fi.IsDir() {
			return tools{}, fmt.Errorf("mount %s at %s: not a directory: %w", s.Mounts[p], p, ErrInvalid)
		}
		binds = append(binds, "--bind", s.Mounts[p], p)
	}
	return tools{bwrap, prlimit, binds}, nil
}

// fdSet numbers the files bwrap inherits: the first is fd 3.
type fdSet struct{ files []*os.File }

func (f *fdSet) add(file *os.File) int {
	f.files = append(f.files, file)
	return 2 + len(f.files)
}

// VerdictBytes is how much of a verdict Run keeps (Spec.Verdict).
const VerdictBytes = 4096

// EnvVerdict is the variable that names the verdict channel in a sandbox
// with Spec.Verdict: a path to write the verdict to.
const EnvVerdict = "RLPIPE_VERDICT"

// launch runs s.Command in a new bubblewrap sandbox and waits for it: the
// part Run and RunIn share. tmpfs are the private tmpfs mounts (each
// FileBytes big); work are the arguments that set up /work, naming the
// files of fds (which launch closes once bwrap has them).
func launch(ctx context.Context, s Spec, lim Limits, t tools, tmpfs, work []string, fds *fdSet) (Result, error) {
	wallCtx, cancel := context.WithTimeout(ctx, lim.Wall)
	defer cancel()
	b, err := setUp(ctx, wallCtx, s, lim, t, tmpfs, work, fds)
	defer b.release()
	if err != nil {
		return Result{}, err
	}
	if len(s.Stdin) > 0 {
		b.cmd.Stdin = bytes.NewReader(s.Stdin)
	}
	overflow := make(chan struct{})
	var once sync.Once
	full := func() { once.Do(func() { close(overflow) }) }
	stdout := &capWriter{limit: lim.OutputBytes, full: full}
	stderr := &capWriter{limit: lim.OutputBytes, full: full}
	b.cmd.Stdout, b.cmd.Stderr = stdout, stderr
	if err := b.begin(ctx); err != nil {
		return Result{}, err
	}
	killedOutput := false
	select {
	case <-b.waited:
	case <-overflow:
		killedOutput = true
		_ = b.kill()
		<-b.waited
	}
	return b.result(ctx, stdout.String(), stderr.String(), killedOutput, b.canceled.Load())
}

// box is one sandbox's bwrap: set up by setUp, started by begin, read by
// result, released by release. Run, RunIn and Start share it, so the
// namespaces, binds, seccomp filter, limits, cgroup and kill-on-exit are
// the same code for a one-shot run and a long-lived process.
type box struct {
	lim      Limits
	t        tools
	cmd      *exec.Cmd
	grp      group
	init     sandboxInit
	ownPIDNS bool
	fds      *fdSet
	toClose  []*os.File
	statusR  *os.File
	blockW   *os.File
	verdictR *os.File
	// canceled: the command's context ended and its Cancel killed the
	// sandbox (Run's wall clock, Start's context).
	canceled  atomic.Bool
	killedCPU atomic.Bool
	status    chan bwrapStatus
	verdict   chan string
	waited    chan struct{}
	start     time.Time
	elapsed   time.Duration
}

// setUp builds the bwrap command for s: every namespace, bind, mount,
// variable, seccomp filter and rlimit, and the cgroup. cmdCtx kills the
// sandbox when it ends. The caller sets the command's stdio, calls begin,
// and always calls release (b may be nil).
func setUp(ctx, cmdCtx context.Context, s Spec, lim Limits, t tools, tmpfs, work []string, fds *fdSet) (b *box, err error) {
	b = &box{lim: lim, t: t, fds: fds}
	pipe := func(what string) (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err != nil {
			return nil, nil, fmt.Errorf("create %s pipe: %v: %w", what, err, ErrInfra)
		}
		b.toClose = append(b.toClose, r, w)
		return r, w, nil
	}
	statusR, statusW, err := pipe("status")
	if err != nil {
		return b, err
	}
	b.statusR = statusR
	args := []string{"--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"}
	args = append(args, t.binds...)
	args = append(args, "--proc", "/proc")
	masks, maskFiles, err := procMaskArgs(fds)
	b.toClose = append(b.toClose, maskFiles...)
	if err != nil {
		return b, err
	}
	args = append(args, masks...)
	args = append(args, "--dev", "/dev")
	size := strconv.FormatInt(lim.FileBytes, 10)
	for _, dir := range tmpfs {
		args = append(args, "--size", size, "--tmpfs", dir)
	}
	args = append(args, work...)
	ro, roFiles, err := readOnlyFileArgs(s.ReadOnlyFiles, fds)
	b.toClose = append(b.toClose, roFiles...)
	if err != nil {
		return b, err
	}
	args = append(args, ro...)
	args = append(args, "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/work", "--clearenv")
	env := environ(s.Env)
	if s.Verdict {
		var verdictW *os.File
		if b.verdictR, verdictW, err = pipe("verdict"); err != nil {
			return b, err
		}
		// The program opens the pipe again by its /dev/fd path, which
		// checks the pipe's owner: make it the sandbox's user.
		if uid, gid := SandboxUID(); uid != os.Geteuid() {
			if err := verdictW.Chown(uid, gid); err != nil {
				return b, fmt.Errorf("give the verdict pipe to uid %d: %v: %w", uid, err, ErrInfra)
			}
		}
		env = append(env, [2]string{EnvVerdict, "/dev/fd/" + strconv.Itoa(fds.add(verdictW))})
	}
	for _, kv := range env {
		args = append(args, "--setenv", kv[0], kv[1])
	}
	filter, err := seccompFile()
	if err != nil {
		return b, err
	}
	if filter != nil {
		b.toClose = append(b.toClose, filter)
		args = append(args, "--seccomp", strconv.Itoa(fds.add(filter)))
	}
	if b.grp, err = newGroup(ctx, lim); err != nil {
		return b, err
	}
	// bwrap's child, the sandbox's init, waits on --block-fd until this
	// process holds it by a pidfd: the pid in bwrap's status could name
	// another process once the init has ended.
	blockR, blockW, err := pipe("block")
	if err != nil {
		return b, err
	}
	b.blockW = blockW
	args = append(args, "--block-fd", strconv.Itoa(fds.add(blockR)))
	args = append(args, "--json-status-fd", strconv.Itoa(fds.add(statusW)), "--",
		t.prlimit,
		"--cpu="+strconv.FormatInt(lim.cpuSeconds(), 10)+":"+strconv.FormatInt(lim.cpuSeconds()+1, 10),
		"--as="+strconv.FormatInt(lim.MemoryBytes, 10),
		"--nproc="+strconv.Itoa(lim.Procs),
		"--fsize="+size,
		"--core=0",
		"--")
	args = append(args, s.Command...)

	cmd := exec.CommandContext(cmdCtx, t.bwrap, args...)
	cmd.Env = []string{"PATH=" + DefaultPath}
	cmd.Dir = "/"
	cmd.ExtraFiles = fds.files
	cmd.SysProcAttr = bwrapAttr()
	b.ownPIDNS = cmd.SysProcAttr.Cloneflags&syscall.CLONE_NEWPID != 0
	cmd.Cancel = func() error {
		b.canceled.Store(true)
		return b.kill()
	}
	cmd.WaitDelay = 5 * time.Second
	b.cmd = cmd
	return b, nil
}

// kill ends the sandbox. Killing the sandbox's init ends its PID
// namespace, every process in it, and then bwrap, which has reaped the
// init: nothing is orphaned. Only a sandbox whose init never started is
// ended by killing bwrap.
func (b *box) kill() error {
	if b.init.kill() {
		return nil
	}
	return syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
}

// begin starts bwrap and lets the sandbox's command run once the init is
// held by a pidfd. It returns an error only when bwrap could not start;
// a sandbox that failed its setup is seen by result.
func (b *box) begin(ctx context.Context) error {
	warnNoPIDNS(ctx)
	b.start = time.Now()
	if err := closeInheritedOnExec(); err != nil {
		return fmt.Errorf("keep inherited files out of the sandbox: %v: %w", err, ErrInfra)
	}
	started := func() {}
	if b.grp != nil {
		var err error
		if started, err = b.grp.prepare(b.cmd); err != nil {
			return fmt.Errorf("start the sandbox in its cgroup: %v: %w", err, ErrInfra)
		}
	}
	err := b.cmd.Start()
	started()
	if err != nil {
		return fmt.Errorf("start %s: %v: %w", b.t.bwrap, err, ErrInfra)
	}
	// The sandbox holds its own copies now.
	closeAll(b.fds.files)
	childPID := make(chan int, 1)
	b.status = make(chan bwrapStatus, 1)
	go func() { b.status <- readStatus(b.statusR, childPID) }()
	b.verdict = make(chan string, 1)
	if b.verdictR != nil {
		go func() { b.verdict <- readVerdict(b.verdictR) }()
	} else {
		b.verdict <- ""
	}
	b.waited = make(chan struct{})
	go func() {
		_ = b.cmd.Wait() // the outcome is read from bwrap's status and ProcessState
		b.elapsed = time.Since(b.start)
		close(b.waited)
	}()
	select {
	case pid := <-childPID:
		if b.ownPIDNS {
			pid = hostPID(b.cmd.Process.Pid, pid)
		}
		b.init.open(pid)
		if testHookInit != nil {
			testHookInit(pid)
		}
		b.blockW.Write([]byte{1})
		b.blockW.Close()
		if b.grp != nil {
			if _, ok := b.grp.cpuUsed(); ok {
				go watchCPU(b.grp, b.lim.CPUTime, b.waited, func() {
					b.killedCPU.Store(true)
					_ = b.kill()
				})
			}
		}
	case <-b.waited:
	}
	return nil
}

// result turns what happened into a Result once bwrap has exited:
// killedOutput and killedWall say which of the caller's limits killed it.
// The error is non-nil when ctx ended (StatusCanceled) or bwrap never
// started the command (ErrInfra).
func (b *box) result(ctx context.Context, stdout, stderr string, killedOutput, killedWall bool) (Result, error) {
	<-b.waited
	st := <-b.status
	b.init.reap()
	if ctx.Err() != nil {
		return Result{Status: StatusCanceled, ExitCode: -1, Duration: b.elapsed,
			Stdout: stdout, Stderr: stderr}, fmt.Errorf("sandbox run: %w", ctx.Err())
	}
	if !st.started {
		msg := strings.TrimSpace(stderr)
		if msg == "" {
			msg = b.cmd.ProcessState.String()
		}
		return Result{}, fmt.Errorf("bwrap: %s: %w", msg, ErrInfra)
	}
	o := outcome{
		exitCode:     st.exitCode,
		killedOutput: killedOutput,
		killedWall:   (killedWall || b.killedCPU.Load()) && !killedOutput,
		stdout:       stdout,
		stderr:       stderr,
	}
	var used time.Duration
	counted := false
	if b.grp != nil {
		o.oomKilled = b.grp.memoryExceeded()
		used, counted = b.grp.cpuUsed()
	}
	o.cpuLimitReachable = cpuLimitReachable(b.lim, b.elapsed, used, counted)
	r := classify(o)
	r.Duration = b.elapsed
	r.Verdict = <-b.verdict
	return r, nil
}

// release closes what setUp opened and removes the cgroup; b may be nil.
func (b *box) release() {
	if b == nil {
		return
	}
	closeAll(b.toClose)
	if b.grp != nil {
		b.grp.remove()
	}
}

// pidNamespace: why bwrap runs as PID 1 of a PID namespace of its own
// where rlpipe may make one.
//
// rlpipe can be killed (kill -9) at any moment, also while bwrap sets a
// sandbox up. bwrap's --die-with-parent arms the sandbox init's
// parent-death signal only after the setup, which goes on once rlpipe is
// gone (its --block-fd then reads end-of-file), and bwrap itself dies
// with rlpipe: a kill in that window left a sandbox running with no
// parent (25 of 45 kills during setup in TestKillDuringSetupLeavesNothingRunning
// before this). Now bwrap is the first
// process of a new PID namespace, and the sandbox's init is in it:
//
//   - bwrap arms its own parent-death signal (--die-with-parent) before
//     it reports the init's pid on the status pipe;
//   - if rlpipe dies before that, the report fails (nobody reads the pipe
//     any more) and bwrap exits;
//   - if it dies after, the signal kills bwrap;
//
// and either way, bwrap being the namespace's init, the kernel kills
// every process in the namespace with it. Nothing of the sandbox
// outlives rlpipe, whenever the kill comes. (Go's Pdeathsig cannot be
// used with CLONE_NEWPID: the child sees parent pid 0 in the new
// namespace and takes its parent for dead.)
//
// A plain new PID namespace needs CAP_SYS_ADMIN (root with it). Where
// that is refused (another user, a container that drops the capability)
// but user namespaces are allowed, bwrap starts in a new user namespace
// and a new PID namespace together, its own uid and gid mapped to
// themselves, as `unshare --user --map-current-user --pid --fork` does:
// the same guarantee for ordinary users (TestUnprivilegedSandbox). bwrap
// still makes the sandbox's own nested user namespace inside it. Only
// where both are refused does bwrap keep Go's parent-death signal and
// the window above, and Run warns once, saying why (see the threat model
// in docs/REWARDS.md). Which one holds is found once per process.
//
// bwrap reports the init's pid as its own namespace numbers it; hostPID
// turns that into this process's number.

// pidNS is how bwrap gets a PID namespace of its own.
type pidNS int

const (
	pidNSNone  pidNS = iota // none: Go's parent-death signal
	pidNSPlain              // CLONE_NEWPID, where CAP_SYS_ADMIN allows it
	pidNSUser               // CLONE_NEWUSER|CLONE_NEWPID, uid and gid mapped to themselves
)

func (m pidNS) String() string {
	return [...]string{"no PID namespace", "a PID namespace", "a user and a PID namespace"}[m]
}

// bwrapAttr returns how bwrap is started: in a process group of its own,
// as nobody when this process is root (see SandboxUID), and as PID 1 of a
// new PID namespace where this process may make one, else with Go's
// parent-death signal (see pidNamespace).
func bwrapAttr() *syscall.SysProcAttr { return pidNSAttr(pidMode()) }

func pidNSAttr(m pidNS) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	root := os.Geteuid() == 0
	if root {
		a.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
	switch m {
	case pidNSPlain:
		a.Cloneflags = syscall.CLONE_NEWPID
	case pidNSUser:
		// bwrap runs as the uid and gid it would have had, mapped to
		// themselves; the Credential above is applied inside, where
		// nobody is mapped. Only root may keep setgroups (to drop its
		// groups); another user's supplementary groups stay as they are.
		uid, gid := SandboxUID()
		a.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		a.GidMappingsEnableSetgroups = root
	default:
		a.Pdeathsig = syscall.SIGKILL
	}
	return a
}

var (
	pidNSOnce sync.Once
	pidNSOK   pidNS
	pidNSWhy  string
	// testPIDNS, when set, forces a way of starting bwrap (one this
	// process may use), for the tests of what each promises.
	testPIDNS *pidNS
)

// pidMode is how bwrap gets a PID namespace here: found once, by starting
// /bin/true with each way's attributes in turn (Start would fail with a
// refused one, and could not be retried). pidNSWhy says why none, then.
func pidMode() pidNS {
	pidNSOnce.Do(func() {
		var why []string
		for _, m := range []pidNS{pidNSPlain, pidNSUser} {
			cmd := exec.Command("/bin/true")
			cmd.SysProcAttr = pidNSAttr(m)
			err := cmd.Run()
			if err == nil {
				pidNSOK = m
				return
			}
			why = append(why, fmt.Sprintf("%s: %v", m, err))
		}
		pidNSWhy = strings.Join(why, "; ")
	})
	if testPIDNS != nil {
		return *testPIDNS
	}
	return pidNSOK
}

// canNewPID reports whether bwrap runs as the init of a PID namespace of
// its own here, by either way.
func canNewPID() bool { return pidMode() != pidNSNone }

// warnNoPIDNS logs once, when bwrap runs without a PID namespace of its
// own, that a kill during setup can leave a sandbox running, and why.
func warnNoPIDNS(ctx context.Context) {
	if pidMode() != pidNSNone {
		return
	}
	pidWarnOnce.Do(func() {
		zerolog.Ctx(ctx).Warn().Str("why", pidNSWhy).
			Msg("sandbox: no PID namespace for bwrap, so a kill of rlpipe during a sandbox's setup can leave it running (docs/REWARDS.md)")
	})
}

var pidWarnOnce sync.Once

// hostPID returns the pid, in this process's PID namespace, of the child
// of bwrap (bwrapPID) that is nsPID in bwrap's namespace, found among
// bwrap's children by their NSpid; 0 when none is (nsPID may name
// another process here: Run then kills the sandbox through bwrap).
func hostPID(bwrapPID, nsPID int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", bwrapPID, bwrapPID))
	if err != nil {
		return 0
	}
	for _, c := range strings.Fields(string(b)) {
		status, err := os.ReadFile("/proc/" + c + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			f := strings.Fields(strings.TrimPrefix(line, "NSpid:"))
			if strings.HasPrefix(line, "NSpid:") && len(f) >= 2 && f[1] == strconv.Itoa(nsPID) {
				if pid, err := strconv.Atoi(f[0]); err == nil {
					return pid
				}
			}
		}
	}
	return 0
}

// testHookInit, when set by a test, is called with the sandbox init's
// pid while the init waits on --block-fd, in the middle of bwrap's setup.
var testHookInit func(pid int)

// watchCPU calls over once the group has used budget of CPU time, all its
// processes together, or returns when done is closed.
// cpuSlack is how far past the budget the whole group may go before
// watchCPU kills it: the kernel's per-process limit acts first for a
// single process (SIGXCPU at the budget, SIGKILL a second later), so its
// result stays the same whether or not a cgroup is in force; the group
// steps in for processes that pass the budget only together.
const cpuSlack = time.Second

func watchCPU(g group, budget time.Duration, done <-chan struct{}, over func()) {
	t := time.NewTicker(cgroupPoll)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if used, ok := g.cpuUsed(); ok && used >= budget+cpuSlack {
				over()
				return
			}
		}
	}
}

// sandboxInit is the sandbox's init, bwrap's child: PID 1 of the sandbox's
// PID namespace. It is held by a pidfd, so a kill never reaches another
// process that got the same pid.
type sandboxInit struct {
	mu sync.Mutex
	fd int // -1 before open and after close
	ok bool
}

func (i *sandboxInit) open(pid int) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if pid <= 0 {
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err == nil {
		i.fd, i.ok = fd, true
	}
}

// kill sends SIGKILL to the init; false when there is none to kill.
func (i *sandboxInit) kill() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.ok {
		return false
	}
	return unix.PidfdSendSignal(i.fd, unix.SIGKILL, nil, 0) == nil
}

// reap is called once bwrap has exited. bwrap exits as soon as its init
// reports the command's exit code, before the init itself is gone, so
// the init is orphaned: reparented to the host's init, or to this process
// when it is a child subreaper or PID 1 (a container without an init),
// which must then reap it or keep a zombie per run. reap ends the init
// (its command is over) and reaps it when it is this process's child;
// otherwise waitid fails with ECHILD and the host's init reaps it.
func (i *sandboxInit) reap() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.ok {
		return
	}
	_ = unix.PidfdSendSignal(i.fd, unix.SIGKILL, nil, 0)
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PIDFD, i.fd, &info, unix.WEXITED, nil)
		if err != unix.EINTR {
			break
		}
	}
	unix.Close(i.fd)
	i.ok = false
}

// readVerdict keeps the first VerdictBytes written to the verdict channel
// and drains the rest, until every writer in the sandbox is gone.
func readVerdict(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, VerdictBytes))
	_, _ = io.Copy(io.Discard, r)
	return string(b)
}

// readOnlyFileArgs returns the bwrap arguments that make each of files
// (absolute sandbox paths) a read-only file, and the files holding the
// data, numbered in fds.
func readOnlyFileArgs(files map[string][]byte, fds *fdSet) ([]string, []*os.File, error) {
	var args []string
	var opened []*os.File
	made := map[string]bool{}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		var dirs []string
		for d := path.Dir(p); d != "/" && !made[d]; d = path.Dir(d) {
			dirs = append(dirs, d)
			made[d] = true
		}
		for i := len(dirs) - 1; i >= 0; i-- {
			args = append(args, "--perms", "0755", "--dir", dirs[i])
		}
		f, err := memFile(path.Base(p), files[p])
		if err != nil {
			return nil, opened, err
		}
		opened = append(opened, f)
		args = append(args, "--perms", "0444", "--ro-bind-data", strconv.Itoa(fds.add(f)), p)
	}
	return args, opened, nil
}

// maskedProc are the files of /proc that a sandbox sees empty: the
// kernel's symbols (addresses are hidden from the sandbox's user by
// kptr_restrict, but not the names, which say what code is loaded) and
// its build configuration (which says which bugs it has). Each is masked
// only where the host has it: a bind needs its target to exist. Host
// paths in /proc/self/mountinfo cannot be masked this way, see the threat
// model in docs/REWARDS.md.
var maskedProc = []string{"/proc/kallsyms", "/proc/config.gz"}

// procMaskArgs returns the bwrap arguments that bind an empty read-only
// file over each of maskedProc the host has, after --proc /proc, and the
// files holding the empty data, numbered in fds.
func procMaskArgs(fds *fdSet) ([]string, []*os.File, error) {
	var args []string
	var opened []*os.File
	for _, p := range maskedProc {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		f, err := memFile(path.Base(p), nil)
		if err != nil {
			return nil, opened, err
		}
		opened = append(opened, f)
		args = append(args, "--perms", "0444", "--ro-bind-data", strconv.Itoa(fds.add(f)), p)
	}
	return args, opened, nil
}

// Available reports whether sandboxes can run here: nil when bwrap starts a
// trivial command, else an error that says why (ErrNoBwrap says how to
// install it).
func Available() error { return available(context.Background(), "") }

func available(ctx context.Context, bwrap string) error {
	r, err := Run(ctx, Spec{Command: []string{"true"}, Bwrap: bwrap})
	if err != nil {
		return err
	}
	if !r.Passed() {
		return fmt.Errorf("bwrap starts but `true` fails inside (status %s, exit %d): %s: %w",
			r.Status, r.ExitCode, strings.TrimSpace(r.Stderr), ErrInfra)
	}
	return nil
}

func (s Spec) validate() error {
	if len(s.Command) == 0 || s.Command[0] == "" {
		return fmt.Errorf("empty command: %w", ErrInvalid)
	}
	for _, a := range s.Command {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("command argument %q holds a NUL byte: %w", a, ErrInvalid)
		}
	}
	for name := range s.Files {
		if name == "." || !filepath.IsLocal(name) || path.Clean(name) != name || strings.IndexByte(name, 0) >= 0 {
			return fmt.Errorf("file %q: want a clean relative path inside the workspace: %w", name, ErrInvalid)
		}
	}
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("env %q: want a name without '=' or NUL: %w", k, ErrInvalid)
		}
	}
	for _, b := range s.ReadOnlyBinds {
		if !filepath.IsAbs(b) || filepath.Clean(b) != b || b == "/" {
			return fmt.Errorf("read-only bind %q: want a clean absolute path other than /: %w", b, ErrInvalid)
		}
		for _, own := range []string{"/work", "/tmp", "/proc", "/dev"} {
			if b == own || strings.HasPrefix(b, own+"/") {
				return fmt.Errorf("read-only bind %q would hide or land in the sandbox's own %s: %w", b, own, ErrInvalid)
			}
		}
	}
	for p := range s.ReadOnlyFiles {
		if err := checkReadOnlyPath(p, s.ReadOnlyBinds); err != nil {
			return err
		}
	}
	for _, m := range []struct {
		what   string
		mounts map[string]string
	}{{"read-only mount", s.ReadOnlyMounts}, {"mount", s.Mounts}} {
		for _, p := range slices.Sorted(maps.Keys(m.mounts)) {
			check := p
			if len(p) > 1 && strings.Count(p, "/") == 1 {
				check = p + "/x" // a directory of its own: /app
			}
			if err := checkReadOnlyPath(check, s.ReadOnlyBinds); err != nil {
				return fmt.Errorf("%s of %s: %w", m.what, m.mounts[p], err)
			}
			top := "/" + strings.SplitN(p[1:], "/", 2)[0]
			for f := range s.ReadOnlyFiles {
				if strings.HasPrefix(f, top+"/") {
					return fmt.Errorf("%s %s and read-only file %s share %s: give each a directory of its own: %w", m.what, p, f, top, ErrInvalid)
				}
			}
			if h := m.mounts[p]; !filepath.IsAbs(h) || filepath.Clean(h) != h || strings.IndexByte(h, 0) >= 0 {
				return fmt.Errorf("%s %s: host path %q: want a clean absolute path: %w", m.what, p, h, ErrInvalid)
			}
		}
	}
	for p := range s.Mounts {
		if _, ok := s.ReadOnlyMounts[p]; ok {
			return fmt.Errorf("%s is both a mount and a read-only mount: %w", p, ErrInvalid)
		}
	}
	return s.Limits.validate()
}

// checkReadOnlyPath checks a key of Spec.ReadOnlyFiles.
func checkReadOnlyPath(p string, binds []string) error {
	if !path.IsAbs(p) || path.Clean(p) != p || strings.IndexByte(p, 0) >= 0 || strings.Count(p, "/") < 2 {
		return fmt.Errorf("read-only file %q: want a clean absolute path in a directory of its own, e.g. /check/expected.txt: %w", p, ErrInvalid)
	}
	top := "/" + strings.SplitN(p[1:], "/", 2)[0]
	taken := append([]string{"/work", "/tmp", "/proc", "/dev", "/etc", "/run"}, DefaultBinds...)
	for _, b := range append(taken, binds...) {
		if top == b || strings.HasPrefix(b, top+"/") {
			return fmt.Errorf("read-only file %q: %s belongs to the sandbox or the host's binds; put it under a directory of its own such as /check: %w", p, top, ErrInvalid)
		}
	}
	return nil
}

func checkFileSizes(files map[string][]byte, limit int64) error {
	var total int64
	for _, data := range files {
		total += int64(len(data))
	}
	if total > limit {
		return fmt.Errorf("files hold %d bytes, more than the workspace's FileBytes %d: %w", total, limit, ErrInvalid)
	}
	return nil
}

func lookBwrap(p string) (string, error) {
	if p == "" {
		p = "bwrap"
	}
	found, err := exec.LookPath(p)
	if err != nil {
		return "", fmt.Errorf("look up %s: %w", p, ErrNoBwrap)
	}
	return found, nil
}

// lookPrlimit finds util-linux's prlimit, which sets the limits inside the
// sandbox; it must sit under /usr (or /bin, /sbin) to be visible there.
func lookPrlimit() (string, error) {
	p, err := exec.LookPath("prlimit")
	if err != nil {
		return "", fmt.Errorf("look up prlimit (util-linux): %v: %w", err, ErrInfra)
	}
	for _, dir := range []string{"/usr/", "/bin/", "/sbin/"} {
		if strings.HasPrefix(p, dir) {
			return p, nil
		}
	}
	return "", fmt.Errorf("prlimit is at %s, outside /usr, /bin and /sbin: %w", p, ErrInfra)
}

// bindArgs returns the bwrap arguments for DefaultBinds, extra and
// mounts (sandbox path → host path).
func bindArgs(extra []string, mounts map[string]string) ([]string, error) {
	var args []string
	for _, p := range DefaultBinds {
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
			continue // not on this host
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return nil, fmt.Errorf("read link %s: %v: %w", p, err, ErrInfra)
			}
			args = append(args, "--symlink", target, p)
		default:
			args = append(args, "--ro-bind", p, p)
		}
	}
	for _, p := range extra {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("read-only bind %s: %v: %w", p, err, ErrInfra)
		}
		args = append(args, "--ro-bind", p, p)
	}
	for _, p := range slices.Sorted(maps.Keys(mounts)) {
		if _, err := os.Stat(mounts[p]); err != nil {
			return nil, fmt.Errorf("read-only mount %s at %s: %v: %w", mounts[p], p, err, ErrInfra)
		}
		args = append(args, "--ro-bind", mounts[p], p)
	}
	return args, nil
}

// stage writes files under ws and opens them for bwrap's --file, which
// copies each into the sandbox's tmpfs workspace.
func stage(ws string, files map[string][]byte) ([]string, []*os.File, error) {
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range files {
			if !yield(name) {
				return
			}
		}
	})
	opened := make([]*os.File, 0, len(names))
	for _, name := range names {
		p := filepath.Join(ws, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, opened, fmt.Errorf("stage %s: %v: %w", name, err, ErrInfra)
		}
		if err := os.WriteFile(p, files[name], 0o600); err != nil {
			return nil, opened, fmt.Errorf("stage %s: %v: %w", name, err, ErrInfra)
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, opened, fmt.Errorf("stage %s: %v: %w", name, err, ErrInfra)
		}
		opened = append(opened, f)
	}
	return names, opened, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// environ returns the sandbox's variables as sorted name, value pairs.
func environ(extra map[string]string) [][2]string {
	env := map[string]string{"PATH": DefaultPath, "HOME": "/work", "LANG": "C.UTF-8"}
	for k, v := range extra {
		env[k] = v
	}
	var out [][2]string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, [2]string{k, env[k]})
	}
	return out
}

// bwrapStatus is what bwrap reported on its --json-status-fd.
type bwrapStatus struct {
	started  bool // the sandbox was set up and the command spawned
	exitCode int  // -1 when bwrap did not report one (it was killed)
}

// readStatus reads bwrap's status until bwrap closes it, sending the
// sandbox init's host pid on childPID as soon as bwrap reports it.
func readStatus(r io.Reader, childPID chan<- int) bwrapStatus {
	st := bwrapStatus{exitCode: -1}
	dec := json.NewDecoder(r)
	for {
		var m struct {
			ChildPID *int `json:"child-pid"`
			ExitCode *int `json:"exit-code"`
		}
		if err := dec.Decode(&m); err != nil {
			if !errors.Is(err, io.EOF) {
				_, _ = io.Copy(io.Discard, r) // let bwrap finish writing
			}
			return st
		}
		if m.ChildPID != nil && !st.started {
			st.started = true
			childPID <- *m.ChildPID
		}
		if m.ExitCode != nil {
			st.exitCode = *m.ExitCode
		}
	}
}

// capWriter keeps the first limit bytes written to it and calls full once
// more arrive.
type capWriter struct {
	limit int64
	full  func()
	buf   bytes.Buffer
}

func (w *capWriter) Write(p []byte) (int, error) {
	room := w.limit - int64(w.buf.Len())
	if int64(len(p)) > room {
		w.buf.Write(p[:max(room, 0)])
		w.full()
		return len(p), nil // keep draining until the kill closes the pipe
	}
	w.buf.Write(p)
	return len(p), nil
}

// String returns what was kept, without a character cut in two at the limit.
func (w *capWriter) String() string {
	b := w.buf.Bytes()
	if int64(len(b)) == w.limit {
		for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
			if r := b[len(b)-i]; utf8.RuneStart(r) {
				if !utf8.FullRune(b[len(b)-i:]) {
					b = b[:len(b)-i]
				}
				break
			}
		}
	}
	return string(b)
}

// closeInheritedOnExec marks every descriptor above stderr close-on-exec.
// Go opens its own files that way, but a descriptor this process
// inherited from its parent (a CI runner, a supervisor) is open across
// exec, and bwrap passes what it gets on to the code it runs: one such
// descriptor is a way out of the sandbox. The files the sandbox is meant
// to get are ExtraFiles, which exec duplicates into place regardless.
func closeInheritedOnExec() error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		syscall.CloseOnExec(fd) // a descriptor closed since the listing is no matter
	}
	return nil
}

package harbor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/internal/scratch"
	"github.com/rlpipe/rlpipe/sandbox"
)

// Verdict is what the verifier made of a final world.
type Verdict struct {
	// Reward is Components["reward"] when there is one, else the mean of
	// Components.
	Reward float64
	// Components are reward.json's numbers, or {"reward": reward.txt}.
	Components map[string]float64
	// Status is the verifier's sandbox status (ok, failed), or
	// agent.StatusUnsafePath when the world held a path the verifier must
	// not open (the verifier did not run; reward 0).
	Status string
	// Reason says why the verifier did not run.
	Reason   string
	ExitCode int
	// Stdout is the last 2 KiB of /logs/verifier/test-stdout.txt.
	Stdout string
}

// The reward files test.sh writes in /logs/verifier.
const (
	RewardJSON = "reward.json"
	RewardText = "reward.txt"
	// TestOutput holds test.sh's stdout and stderr, as in Harbor.
	TestOutput = "test-stdout.txt"
)

// maxRewardBytes bounds what is read of a reward file.
const maxRewardBytes = 1 << 16

// Verify runs the task's tests/test.sh against a final world (root, a
// workspace of world): first the world is checked for paths the verifier
// must not open (agent.UnsafePaths, strict: a symlink the episode made
// that leaves the world or dangles, a FIFO, a socket, a device score 0 and
// nothing runs); then test.sh runs in a sandbox of its own, as Harbor
// runs it — `(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1` in
// the task's working directory — with the world's directories read-only
// at their paths, tests/ read-only at /tests, /logs/verifier its only
// writable directory (a tmpfs of limits.FileBytes in all, so that a write
// past it fails with "No space left on device"; where mounting is refused,
// a directory whose total past FileBytes is an ErrReward after the run),
// the host's PATH and HOME=/tmp (nothing of the
// agent's), [verifier] env, and [verifier] timeout_sec. Its reward is
// reward.json (an object of finite numbers, or one number), which wins,
// or reward.txt (one number). A test.sh that writes neither, writes
// something else, or times out is an ErrReward: the episode has no
// reward.
func Verify(ctx context.Context, t *Task, world, tests *agent.World, root string, limits sandbox.Limits) (Verdict, error) {
	unsafe, err := agent.UnsafePaths(root, world.Dir, true)
	if err != nil {
		return Verdict{}, fmt.Errorf("verify harbor task %s: %v: %w", t.Name, err, ErrInfra)
	}
	if len(unsafe) > 0 {
		return Verdict{Status: agent.StatusUnsafePath, Reason: agent.UnsafeReason(unsafe), Components: map[string]float64{}}, nil
	}
	logs, err := scratch.Mkdir("", "rlpipe-harbor-verifier-")
	if err != nil {
		return Verdict{}, fmt.Errorf("verify harbor task %s: %v: %w", t.Name, err, ErrInfra)
	}
	defer logs.Remove()
	dir := filepath.Join(logs.Path(), "verifier")
	if err := os.Chmod(logs.Path(), 0o711); err != nil {
		return Verdict{}, fmt.Errorf("verify harbor task %s: %v: %w", t.Name, err, ErrInfra)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return Verdict{}, fmt.Errorf("verify harbor task %s: %v: %w", t.Name, err, ErrInfra)
	}
	// test.sh runs the agent's code, which could fill the host's disk one
	// file under RLIMIT_FSIZE at a time: /logs/verifier is a tmpfs of
	// FileBytes in all, as an agent's workspace is. Where mounting is
	// refused, what it holds is measured after the run instead.
	logBytes := cmp.Or(limits.FileBytes, sandbox.DefaultFileBytes)
	bounded := mountLogs(dir, logBytes) == nil
	if bounded {
		defer unix.Unmount(dir, unix.MNT_DETACH)
	}
	if uid, gid := sandbox.SandboxUID(); uid != os.Geteuid() {
		if err := os.Chown(dir, uid, gid); err != nil {
			return Verdict{}, fmt.Errorf("verify harbor task %s: %v: %w", t.Name, err, ErrInfra)
		}
	}
	// The cache is private: the sandbox's user reaches the tests through
	// a workspace of their world, as the agent reaches its world.
	tws, err := tests.NewWorkspace(ctx, nil)
	if err != nil {
		return Verdict{}, fmt.Errorf("verify harbor task %s: %w", t.Name, err)
	}
	defer tws.Close()
	ro := map[string]string{SandboxTests: tws.Root()}
	m, err := mounts(root, t.Dockerfile.Tops)
	if err != nil {
		return Verdict{}, fmt.Errorf("verify harbor task %s: %w", t.Name, err)
	}
	maps.Copy(ro, m)
	env := map[string]string{"HOME": "/tmp"}
	maps.Copy(env, t.Config.Verifier.Env)
	env["PATH"] = sandbox.DefaultPath
	lim := limits
	lim.Wall = t.VerifierTimeout()
	lim.CPUTime = max(lim.CPUTime, lim.Wall)
	script := `cd -- "$1" 2>/dev/null || cd /; (` + SandboxTests + `/test.sh) > ` + SandboxVerifierLogs + "/" + TestOutput + ` 2>&1`
	r, err := sandbox.Run(ctx, sandbox.Spec{Command: []string{"bash", "-c", script, "bash", t.Dockerfile.Workdir},
		Env: env, ReadOnlyMounts: ro, Mounts: map[string]string{SandboxVerifierLogs: dir}, Limits: lim})
	if err != nil {
		if ctx.Err() != nil {
			return Verdict{}, fmt.Errorf("verify harbor task %s: %w", t.Name, err)
		}
		return Verdict{}, fmt.Errorf("verify harbor task %s: %v: %w", t.Name, err, ErrInfra)
	}
	v := Verdict{Status: string(r.Status), ExitCode: r.ExitCode, Stdout: tail(filepath.Join(dir, TestOutput), 2048)}
	if r.Status == sandbox.StatusTimeout {
		return Verdict{}, fmt.Errorf("verify harbor task %s: %s timed out after %gs (task.toml [verifier] timeout_sec): the episode has no reward: %w",
			t.Name, TestScript, lim.Wall.Seconds(), ErrReward)
	}
	if r.Status != sandbox.StatusOK && r.Status != sandbox.StatusFailed {
		return Verdict{}, fmt.Errorf("verify harbor task %s: %s was stopped (%s): %s: the episode has no reward: %w",
			t.Name, TestScript, r.Status, strings.TrimSpace(clip(r.Stderr, 200)), ErrReward)
	}
	if !bounded {
		if n := treeBytes(dir); n > logBytes {
			return Verdict{}, fmt.Errorf("verify harbor task %s: %s wrote %d bytes to %s, more than the %d allowed (the sandbox's FileBytes): the episode has no reward: %w",
				t.Name, TestScript, n, SandboxVerifierLogs, logBytes, ErrReward)
		}
	}
	if v.Components, err = readReward(dir); err != nil {
		return Verdict{}, fmt.Errorf("verify harbor task %s: %w", t.Name, err)
	}
	v.Reward = rewardOf(v.Components)
	return v, nil
}

// mountLogs mounts a tmpfs of size bytes on dir; a variable so that a
// test can refuse it, as a host without the right to mount does.
var mountLogs = func(dir string, size int64) error {
	return unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+strconv.FormatInt(size, 10)+",mode=0755")
}

// treeBytes is what the files under dir hold, in bytes.
func treeBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// rewardOf is the "reward" component, else the mean of the components.
func rewardOf(c map[string]float64) float64 {
	if r, ok := c["reward"]; ok {
		return r
	}
	if len(c) == 0 {
		return 0
	}
	sum := 0.0
	for _, k := range slices.Sorted(maps.Keys(c)) {
		sum += c[k]
	}
	return sum / float64(len(c))
}

// readReward reads the reward files test.sh left in dir, as Harbor's
// verifier does: reward.json wins over reward.txt.
func readReward(dir string) (map[string]float64, error) {
	where := func(name string) string { return SandboxVerifierLogs + "/" + name }
	b, err := readFile(filepath.Join(dir, RewardJSON))
	if err == nil {
		if strings.TrimSpace(string(b)) == "" {
			return nil, fmt.Errorf("%s wrote an empty %s: %w", TestScript, where(RewardJSON), ErrReward)
		}
		var raw any
		if err := json.Unmarshal(b, &raw); err != nil {
			return nil, fmt.Errorf("%s wrote %s, which is not JSON (%v): want an object of finite numbers, {\"reward\": 1}: %w", TestScript, where(RewardJSON), err, ErrReward)
		}
		switch x := raw.(type) {
		case float64:
			return map[string]float64{"reward": x}, nil
		case map[string]any:
			out := make(map[string]float64, len(x))
			for _, k := range slices.Sorted(maps.Keys(x)) {
				f, ok := x[k].(float64)
				if !ok {
					return nil, fmt.Errorf("%s wrote %s with %q = %s: want a finite number: %w", TestScript, where(RewardJSON), k, clip(string(shownJSON(x[k])), 40), ErrReward)
				}
				out[k] = f
			}
			return out, nil
		default:
			return nil, fmt.Errorf("%s wrote %s holding %s: want an object of finite numbers, {\"reward\": 1}: %w", TestScript, where(RewardJSON), clip(string(b), 40), ErrReward)
		}
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %v: %w", where(RewardJSON), err, ErrReward)
	}
	b, err = readFile(filepath.Join(dir, RewardText))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s wrote no reward file: want %s (one number) or %s: %w", TestScript, where(RewardText), where(RewardJSON), ErrReward)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", where(RewardText), err, ErrReward)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil, fmt.Errorf("%s wrote an empty %s: %w", TestScript, where(RewardText), ErrReward)
	}
	x, err := strconv.ParseFloat(s, 64)
	if (err != nil && !errors.Is(err, strconv.ErrRange)) || math.IsNaN(x) || math.IsInf(x, 0) {
		return nil, fmt.Errorf("%s wrote %q to %s: want a finite number: %w", TestScript, clip(s, 40), where(RewardText), ErrReward)
	}
	return map[string]float64{"reward": x}, nil
}

// readFile reads a regular file test.sh wrote, never following a link,
// at most maxRewardBytes.
func readFile(p string) ([]byte, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, os.ErrNotExist
		}
		return nil, fmt.Errorf("open: %w (a reward file must be a regular file)", err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	return io.ReadAll(io.LimitReader(f, maxRewardBytes))
}

// tail is the last n bytes of a regular file (never following a link),
// "" when there is none: the end of a long output, where test.sh reports
// its failures, not the end of its first 64 KiB.
func tail(p string, n int64) string {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	b := make([]byte, min(n, fi.Size()))
	m, _ := f.ReadAt(b, fi.Size()-int64(len(b)))
	return string(b[:m])
}

// shownJSON shows a value decoded from JSON as JSON again.
func shownJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Append(nil, v)
	}
	return b
}

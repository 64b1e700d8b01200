package harbor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// The files of a task directory, as Harbor lays them out
// (harbor.models.task.paths.TaskPaths).
const (
	ConfigFile      = "task.toml"
	InstructionFile = "instruction.md"
	DockerfilePath  = "environment/Dockerfile"
	TestsDir        = "tests"
	TestScript      = "tests/test.sh"
	SolveScript     = "solution/solve.sh"
)

// Where the verifier finds things in its sandbox, as in Harbor's
// containers (EnvironmentPaths).
const (
	// SandboxTests holds the task's tests/ directory, read-only.
	SandboxTests = "/tests"
	// SandboxVerifierLogs is the verifier's only writable directory: the
	// reward files and test-stdout.txt go there.
	SandboxVerifierLogs = "/logs/verifier"
)

// DefaultVerifierTimeout is Harbor's [verifier] timeout_sec default.
const DefaultVerifierTimeout = 600 * time.Second

// Config is what rlpipe reads of task.toml (Harbor's TaskConfig, schema
// 1.4). Keys it does not list are ignored, as Harbor ignores unknown keys;
// those it cannot honour refuse the task (Load).
type Config struct {
	SchemaVersion string `toml:"schema_version"`
	// Version is the old name of SchemaVersion.
	Version     string         `toml:"version"`
	Task        *PackageInfo   `toml:"task"`
	Metadata    map[string]any `toml:"metadata"`
	Verifier    VerifierConfig `toml:"verifier"`
	Agent       AgentConfig    `toml:"agent"`
	Environment EnvConfig      `toml:"environment"`
	Steps       []any          `toml:"steps"`
	Source      string         `toml:"source"`
}

// PackageInfo is task.toml's [task]: the task's name ("org/name").
type PackageInfo struct {
	Name        string   `toml:"name"`
	Version     string   `toml:"version"`
	Description string   `toml:"description"`
	Keywords    []string `toml:"keywords"`
}

// VerifierConfig is task.toml's [verifier].
type VerifierConfig struct {
	// TimeoutSec bounds tests/test.sh (default 600).
	TimeoutSec *float64 `toml:"timeout_sec"`
	// Env is given to tests/test.sh.
	Env map[string]string `toml:"env"`
	// EnvironmentMode is "shared" or "separate"; rlpipe always runs the
	// tests in a sandbox of their own, over a read-only view of the final
	// world, whatever it says.
	EnvironmentMode string `toml:"environment_mode"`
}

// AgentConfig is task.toml's [agent].
type AgentConfig struct {
	// TimeoutSec bounds the agent's whole episode (no bound when unset).
	TimeoutSec *float64 `toml:"timeout_sec"`
}

// EnvConfig is task.toml's [environment], as far as rlpipe reads it.
type EnvConfig struct {
	BuildTimeoutSec *float64          `toml:"build_timeout_sec"`
	DockerImage     string            `toml:"docker_image"`
	OS              string            `toml:"os"`
	GPUs            int               `toml:"gpus"`
	Env             map[string]string `toml:"env"`
	Workdir         string            `toml:"workdir"`
}

// Task is a Harbor task directory, read and checked.
type Task struct {
	// Name is [task].name, else the directory's name.
	Name string
	// Dir is the task directory, absolute.
	Dir         string
	Instruction string
	Config      Config
	// Dockerfile is environment/Dockerfile, parsed and checked.
	Dockerfile *Dockerfile
	// Solution is solution/solve.sh; "" when the task has none.
	Solution string
}

// AgentTimeout is [agent] timeout_sec; 0 when unset (no bound but the
// runner's).
func (t *Task) AgentTimeout() time.Duration { return seconds(t.Config.Agent.TimeoutSec, 0) }

// VerifierTimeout is [verifier] timeout_sec, default 600 s.
func (t *Task) VerifierTimeout() time.Duration {
	return seconds(t.Config.Verifier.TimeoutSec, DefaultVerifierTimeout)
}

// BuildTimeout is [environment] build_timeout_sec, default 600 s: it
// bounds each RUN of the Dockerfile.
func (t *Task) BuildTimeout() time.Duration {
	return seconds(t.Config.Environment.BuildTimeoutSec, 600*time.Second)
}

func seconds(s *float64, def time.Duration) time.Duration {
	if s == nil {
		return def
	}
	return time.Duration(*s * float64(time.Second))
}

// Load reads the task in dir: task.toml, instruction.md,
// environment/Dockerfile (see ParseDockerfile), tests/test.sh and, when
// there, solution/solve.sh. A task rlpipe cannot run is an ErrUnsupported
// naming the file and line and the reason; a directory that is not a task
// an ErrTask.
func Load(dir string) (*Task, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("read harbor task %s: %w", dir, err)
	}
	t := &Task{Dir: abs, Name: filepath.Base(abs)}
	cfgPath := filepath.Join(abs, ConfigFile)
	md, err := toml.DecodeFile(cfgPath, &t.Config)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("read harbor task: %s:%d:%d: %s: fix the TOML: %w", cfgPath, pe.Position.Line, pe.Position.Col, pe.Message, ErrTask)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read harbor task %s: no %s: a Harbor task directory holds task.toml, instruction.md, environment/Dockerfile and tests/test.sh: %w", abs, ConfigFile, ErrTask)
		}
		return nil, fmt.Errorf("read harbor task: %s: %v: %w", cfgPath, err, ErrTask)
	}
	_ = md
	c := &t.Config
	if c.Task != nil && c.Task.Name != "" {
		t.Name = c.Task.Name
	}
	refuse := func(key, why string) error {
		return fmt.Errorf("import harbor task %s: %s: %s %s: %w", t.Name, cfgPath, key, why, ErrUnsupported)
	}
	switch {
	case c.Environment.DockerImage != "":
		return nil, refuse("[environment] docker_image", fmt.Sprintf("%q is a prebuilt image, which rlpipe cannot run: build the world from environment/Dockerfile instead", c.Environment.DockerImage))
	case c.Environment.GPUs > 0:
		return nil, refuse("[environment] gpus", fmt.Sprintf("= %d: rlpipe's sandbox has no GPUs", c.Environment.GPUs))
	case c.Environment.OS != "" && c.Environment.OS != "linux":
		return nil, refuse("[environment] os", fmt.Sprintf("%q: rlpipe runs linux tasks only", c.Environment.OS))
	case len(c.Steps) > 0:
		return nil, refuse("[[steps]]", "makes a multi-step task, which rlpipe does not run yet: give the task one instruction and one tests/ directory")
	}
	for key, v := range map[string]*float64{"[agent] timeout_sec": c.Agent.TimeoutSec, "[verifier] timeout_sec": c.Verifier.TimeoutSec,
		"[environment] build_timeout_sec": c.Environment.BuildTimeoutSec} {
		if v != nil && !(*v > 0) {
			return nil, fmt.Errorf("read harbor task %s: %s: %s = %v: want a positive number of seconds: %w", t.Name, cfgPath, key, *v, ErrTask)
		}
	}
	b, err := os.ReadFile(filepath.Join(abs, InstructionFile))
	if err != nil || strings.TrimSpace(string(b)) == "" {
		return nil, fmt.Errorf("read harbor task %s: %s is missing or empty: it is the agent's prompt: %w", t.Name, filepath.Join(abs, InstructionFile), ErrTask)
	}
	t.Instruction = string(b)
	if fi, err := os.Stat(filepath.Join(abs, TestScript)); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read harbor task %s: no %s: the verifier runs it and reads /logs/verifier/reward.txt or reward.json: %w", t.Name, filepath.Join(abs, TestScript), ErrTask)
	}
	if b, err := os.ReadFile(filepath.Join(abs, SolveScript)); err == nil {
		t.Solution = string(b)
	}
	df := filepath.Join(abs, DockerfilePath)
	if _, err := os.Stat(df); err != nil {
		return nil, fmt.Errorf("import harbor task %s: no %s: rlpipe builds the task's world from it (docker-compose tasks are not supported): %w", t.Name, df, ErrUnsupported)
	}
	if t.Dockerfile, err = ParseDockerfile(df, c.Environment.Env); err != nil {
		return nil, fmt.Errorf("import harbor task %s: %w", t.Name, err)
	}
	if c.Environment.Workdir != "" {
		if err := t.Dockerfile.setWorkdir(c.Environment.Workdir); err != nil {
			return nil, fmt.Errorf("import harbor task %s: %s: [environment] workdir: %w", t.Name, cfgPath, err)
		}
	}
	return t, nil
}

// LoadDir reads every task of a directory of tasks: each subdirectory
// holding a task.toml, in name order (dir itself when it is one task).
// A task rlpipe cannot run (ErrUnsupported) is left out and its refusal
// listed in refused, so that one apt-get does not refuse a whole
// benchmark; any other problem of a task stops it, naming the task.
func LoadDir(dir string) (tasks []*Task, refused []error, err error) {
	var dirs []string
	if _, err := os.Stat(filepath.Join(dir, ConfigFile)); err == nil {
		dirs = []string{dir}
	} else {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, nil, fmt.Errorf("read harbor tasks: %v: give a directory of Harbor tasks, or one task: %w", err, ErrTask)
		}
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), ConfigFile)); e.IsDir() && err == nil {
				dirs = append(dirs, filepath.Join(dir, e.Name()))
			}
		}
	}
	names := map[string]string{}
	for _, d := range dirs {
		t, err := Load(d)
		if errors.Is(err, ErrUnsupported) {
			refused = append(refused, err)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if other, dup := names[t.Name]; dup {
			return nil, nil, fmt.Errorf("read harbor tasks in %s: %s and %s are both named %q ([task] name): rename one: %w", dir, other, t.Dir, t.Name, ErrTask)
		}
		names[t.Name] = t.Dir
		tasks = append(tasks, t)
	}
	if len(tasks) == 0 {
		why := "no subdirectory with a task.toml"
		if len(refused) > 0 {
			why = fmt.Sprintf("all %d refused; the first: %v", len(refused), refused[0])
		}
		return nil, refused, fmt.Errorf("read harbor tasks: %s holds no task rlpipe can run (%s): %w", dir, why, ErrTask)
	}
	slices.SortFunc(tasks, func(a, b *Task) int { return strings.Compare(a.Name, b.Name) })
	return tasks, refused, nil
}

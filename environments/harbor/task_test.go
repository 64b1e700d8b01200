package harbor_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/environments/harbor"
)

// newTask writes a task directory with files (path → content; "symlink
// path" → the link's target) over a minimal valid task, and returns it.
func newTask(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "t")
	base := map[string]string{
		"task.toml":              "[task]\nname = \"test/t\"\n",
		"instruction.md":         "Do it.\n",
		"environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\n",
		"tests/test.sh":          "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
	}
	for k, v := range files {
		base[k] = v
	}
	for name, body := range base {
		link, isLink := strings.CutPrefix(name, "symlink ")
		p := filepath.Join(dir, filepath.FromSlash(link))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if isLink {
			if err := os.Symlink(body, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A task asking for what the host cannot give is refused at import, with
// the file, the line and the reason.
func TestImportRefused(t *testing.T) {
	df := func(body string) map[string]string { return map[string]string{"environment/Dockerfile": body} }
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string // after "import harbor task test/t: DIR/"
		is    error
	}{
		{"unsupported instruction", df("FROM ubuntu:24.04\nWORKDIR /app\n\nEXPOSE 8080\n"),
			"environment/Dockerfile:4: EXPOSE is not supported: rlpipe builds a world from FROM (ignored), WORKDIR, ENV, COPY and RUN only", harbor.ErrUnsupported},
		{"ADD", df("FROM ubuntu:24.04\nADD https://example.com/x.tgz /app/\n"),
			"environment/Dockerfile:2: ADD is not supported (it fetches URLs and unpacks archives): use COPY", harbor.ErrUnsupported},
		{"apt-get install", df("FROM ubuntu:24.04\nWORKDIR /app\nRUN apt-get update && \\\n    apt-get install -y jq\n"),
			"environment/Dockerfile:3: RUN runs apt-get, which needs the network or a package manager; rlpipe's sandbox has neither: give the task what it needs in environment/ and COPY it", harbor.ErrUnsupported},
		{"pip install", df("FROM python:3.12\nRUN python3 -m pip install numpy\n"),
			"environment/Dockerfile:2: RUN runs python3, which needs the network or a package manager; rlpipe's sandbox has neither: give the task what it needs in environment/ and COPY it", harbor.ErrUnsupported},
		{"a tool the host lacks", df("FROM ubuntu:24.04\nWORKDIR /app\nRUN echo hi > a.txt && rlpipe-no-such-tool --build\n"),
			"environment/Dockerfile:3: RUN runs rlpipe-no-such-tool, which this host lacks (not on /usr/local/bin:/usr/bin:/bin)", harbor.ErrUnsupported},
		{"COPY into the host's system", map[string]string{"environment/Dockerfile": "FROM ubuntu:24.04\nCOPY tool /usr/local/bin/tool\n", "environment/tool": "x"},
			"environment/Dockerfile:2: COPY /usr/local/bin/tool is under /usr, which rlpipe's sandbox keeps for the host's read-only system or its own use: put the task's files in a directory of its own such as /app", harbor.ErrUnsupported},
		{"COPY of a missing file", df("FROM ubuntu:24.04\nCOPY tool /app/tool\n"),
			"environment/Dockerfile:2: COPY tool is not in environment/", harbor.ErrUnsupported},
		{"COPY through a symlinked directory", map[string]string{"environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\nCOPY sub/.bashrc /app/x\n", "symlink environment/sub": "/root"},
			"environment/Dockerfile:3: COPY sub/.bashrc goes through environment/sub, a symlink to /root: the build follows no symlink, which could reach the host's files; put the files themselves in environment/", harbor.ErrUnsupported},
		{"COPY of a symlink", map[string]string{"environment/Dockerfile": "FROM ubuntu:24.04\nCOPY passwd /app/\n", "symlink environment/passwd": "/etc/passwd"},
			"environment/Dockerfile:2: COPY passwd goes through environment/passwd, a symlink to /etc/passwd: the build follows no symlink, which could reach the host's files; put the files themselves in environment/", harbor.ErrUnsupported},
		{"COPY through a symlink that stays inside", map[string]string{"environment/Dockerfile": "FROM ubuntu:24.04\nCOPY alias/f /app/\n", "environment/real/f": "x", "symlink environment/alias": "real"},
			"environment/Dockerfile:2: COPY alias/f goes through environment/alias, a symlink to real: the build follows no symlink, which could reach the host's files; put the files themselves in environment/", harbor.ErrUnsupported},
		{"COPY from another stage", df("FROM ubuntu:24.04\nCOPY --from=build /out /app\n"),
			"environment/Dockerfile:2: COPY --from=build copies from another image (a multi-stage build), which rlpipe cannot build", harbor.ErrUnsupported},
		{"WORKDIR in the host's system", df("FROM ubuntu:24.04\nWORKDIR /usr/src/app\n"),
			"environment/Dockerfile:2: WORKDIR /usr/src/app is under /usr, which rlpipe's sandbox keeps for the host's read-only system or its own use: put the task's files in a directory of its own such as /app", harbor.ErrUnsupported},
		{"prebuilt image", map[string]string{"task.toml": "[task]\nname = \"test/t\"\n\n[environment]\ndocker_image = \"ghcr.io/x/y:1\"\n"},
			`task.toml: [environment] docker_image "ghcr.io/x/y:1" is a prebuilt image, which rlpipe cannot run: build the world from environment/Dockerfile instead`, harbor.ErrUnsupported},
		{"several steps", map[string]string{"task.toml": "[task]\nname = \"test/t\"\n\n[[steps]]\nname = \"one\"\n"},
			"task.toml: [[steps]] makes a multi-step task, which rlpipe does not run yet: give the task one instruction and one tests/ directory", harbor.ErrUnsupported},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := newTask(t, c.files)
			_, err := harbor.Load(dir)
			want := "import harbor task test/t: " + dir + "/" + c.want + ": harbor task: unsupported"
			if !errors.Is(err, c.is) || err.Error() != want {
				t.Fatalf("got  %v\nwant %s", err, want)
			}
		})
	}
}

// Bad task directories: a TOML error with its line and column, a missing
// instruction or test.sh, a bad timeout.
func TestLoadInvalid(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  func(dir string) string
	}{
		{"toml error", map[string]string{"task.toml": "[task]\nname = \"test/t\"\n[verifier]\ntimeout_sec = = 3\n"},
			func(dir string) string {
				return "read harbor task: " + dir + "/task.toml:4:15: expected value but found '=' instead: fix the TOML: harbor task"
			}},
		{"empty instruction", map[string]string{"instruction.md": "\n"},
			func(dir string) string {
				return "read harbor task test/t: " + dir + "/instruction.md is missing or empty: it is the agent's prompt: harbor task"
			}},
		{"bad timeout", map[string]string{"task.toml": "[task]\nname = \"test/t\"\n[verifier]\ntimeout_sec = -1.0\n"},
			func(dir string) string {
				return "read harbor task test/t: " + dir + "/task.toml: [verifier] timeout_sec = -1: want a positive number of seconds: harbor task"
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := newTask(t, c.files)
			_, err := harbor.Load(dir)
			if !errors.Is(err, harbor.ErrTask) || err.Error() != c.want(dir) {
				t.Fatalf("got  %v\nwant %s", err, c.want(dir))
			}
		})
	}
}

// What Load reads of task.toml and the Dockerfile.
func TestLoad(t *testing.T) {
	tk, err := harbor.Load(task("word-stats"))
	if err != nil {
		t.Fatal(err)
	}
	d := tk.Dockerfile
	if tk.Name != "rlpipe/word-stats" || d.From != "ubuntu:24.04" || d.Workdir != "/app" || d.Env["DATA_DIR"] != "/app/data" ||
		len(d.Steps) != 3 || d.Steps[2].Dst != "/app/data/text.txt" || tk.VerifierTimeout() != 30*time.Second || tk.AgentTimeout() != 0 {
		t.Fatalf("%+v\n%+v", tk, d)
	}
	if got := d.Tops; len(got) != 2 || got[0] != "app" || got[1] != "root" {
		t.Fatalf("tops %v, want [app root]", got)
	}
}

// A RUN that fails in the sandbox when the world is built, or writes
// beside the world's directories (the host's system is read-only), stops
// the build with the Dockerfile's line and what the command said.
func TestWorldBuildFails(t *testing.T) {
	cache, err := cacheOnce()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, dockerfile, want string }{
		{"a failing RUN", "FROM ubuntu:24.04\nWORKDIR /app\nRUN echo building && exit 3\n",
			"environment/Dockerfile:3: RUN echo building && exit 3: failed, exit status 3: building: harbor task: unsupported"},
		{"a RUN writing to the host's system", "FROM ubuntu:24.04\nWORKDIR /app\nRUN touch /opt-rlpipe-test\n",
			"environment/Dockerfile:3: RUN touch /opt-rlpipe-test: failed, exit status 1: touch: cannot touch '/opt-rlpipe-test': Read-only file system: harbor task: unsupported"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := newTask(t, map[string]string{"environment/Dockerfile": c.dockerfile})
			tk, err := harbor.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = tk.Worlds(context.Background(), cache)
			want := `import harbor task test/t: build world "test/t": ` + dir + "/" + c.want
			if !errors.Is(err, harbor.ErrUnsupported) || err.Error() != want {
				t.Fatalf("got  %v\nwant %s", err, want)
			}
		})
	}
}

// The Dockerfile parser never panics, and what it accepts names only
// instructions it honours, at lines of the file.
func FuzzParseDockerfile(f *testing.F) {
	for _, s := range []string{
		"FROM ubuntu:24.04\nWORKDIR /app\nRUN printf '17 25\\n' > /app/input.txt\n",
		"FROM x\nENV A=1 B=\"two words\"\nENV C 3\nCOPY --chown=1 a /app/\n",
		"RUN echo a && \\\n  echo b\n# comment\nEXPOSE 80\n",
		"WORKDIR relative\nCOPY [\"a\", \"/app/a\"]\nRUN [\"bash\"]\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "a"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "Dockerfile")
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := harbor.ParseDockerfile(p, nil)
		if err != nil {
			return
		}
		lines := strings.Count(src, "\n") + 1
		for _, in := range d.Steps {
			switch in.Op {
			case "WORKDIR", "ENV", "COPY", "RUN":
			default:
				t.Fatalf("accepted %s", in.Op)
			}
			if in.Line < 1 || in.Line > lines {
				t.Fatalf("%s at line %d of %d", in.Op, in.Line, lines)
			}
		}
	})
}

// COPY follows no symlink at build time either: a source that became a
// link after the import (or a directory on its way that did) fails the
// build naming it, and none of the host's files reach the world; the
// sources as imported are copied, a file to its path, a directory's
// contents into its destination.
func TestCopyFollowsNoLinkAtBuild(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "f"), []byte("host secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const df = "FROM ubuntu:24.04\nWORKDIR /app\nCOPY sub/f /app/x\nCOPY sub /app/d/\nCOPY g /app/\n"
	for _, c := range []struct {
		name   string
		plant  string // the path in environment/ replaced by a link to host (or host/f), "" for none
		target string
		want   string // after "import harbor task test/t: build world \"test/t\": DIR/environment/Dockerfile:"
	}{
		{"unchanged", "", "", ""},
		{"a directory on the way became a symlink", "sub", host,
			"3: COPY sub/f /app/x: sub/f goes through environment/sub, now a symlink to " + host},
		{"the source became a symlink", "g", filepath.Join(host, "f"),
			"5: COPY g /app/: g goes through environment/g, now a symlink to " + filepath.Join(host, "f")},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := newTask(t, map[string]string{"environment/Dockerfile": df, "environment/sub/f": "task file\n", "environment/g": "g\n"})
			task, err := harbor.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if c.plant != "" {
				p := filepath.Join(dir, "environment", c.plant)
				if err := os.RemoveAll(p); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(c.target, p); err != nil {
					t.Fatal(err)
				}
			}
			cache, err := agent.NewCache(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			world, _, err := task.Worlds(context.Background(), cache)
			if c.want != "" {
				want := "import harbor task test/t: build world \"test/t\": " + dir + "/environment/Dockerfile:" + c.want +
					" (it was not when the task was imported): the build follows no symlink; put the files themselves in environment/ and import the task again: harbor task: unsupported"
				if err == nil || err.Error() != want || !errors.Is(err, harbor.ErrUnsupported) {
					t.Fatalf("build: %v\nwant %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for rel, body := range map[string]string{"app/x": "task file\n", "app/d/f": "task file\n", "app/g": "g\n"} {
				if b, err := os.ReadFile(filepath.Join(world.Dir, rel)); err != nil || string(b) != body {
					t.Errorf("/%s in the world: %q, %v; want %q", rel, b, err, body)
				}
			}
		})
	}
}

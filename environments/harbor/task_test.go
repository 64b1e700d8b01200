package harbor_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/environments/harbor"
)

// newTask writes a task directory with files (path → content) over a
// minimal valid task, and returns it.
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
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
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

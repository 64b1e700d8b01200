package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// TestDatasetHarbor commits the harbor package's test tasks, plus one
// whose Dockerfile runs apt-get: that one is left out with its file, line
// and reason, the others are one prompt each, instruction.md the prompt.
func TestDatasetHarbor(t *testing.T) {
	h := newStore(t)
	tasks := filepath.Join(h.dir, "tasks")
	if err := os.CopyFS(tasks, os.DirFS(filepath.Join("..", "environments", "harbor", "testdata", "tasks"))); err != nil {
		t.Fatal(err)
	}
	h.file("tasks/apt/task.toml", "[task]\nname = \"x/apt\"\n")
	h.file("tasks/apt/instruction.md", "Use jq.\n")
	h.file("tasks/apt/tests/test.sh", "echo 1 > /logs/verifier/reward.txt\n")
	h.file("tasks/apt/environment/Dockerfile", "FROM ubuntu:24.04\nRUN apt-get install -y jq\n")
	var got struct {
		Commit  string   `json:"commit"`
		Prompts string   `json:"prompts"`
		Tasks   int      `json:"tasks"`
		Refused []string `json:"refused"`
	}
	h.json(&got, "dataset", "harbor", tasks, "main")
	wantRefused := "import harbor task x/apt: " + filepath.Join(tasks, "apt", "environment", "Dockerfile") +
		":2: RUN runs apt-get, which needs the network or a package manager; rlpipe's sandbox has neither: give the task what it needs in environment/ and COPY it: harbor task: unsupported"
	if got.Prompts != "main:data/harbor-tasks.parquet" || got.Tasks != 2 || len(got.Refused) != 1 || got.Refused[0] != wantRefused || got.Commit == "" {
		t.Fatalf("committed %+v\nwant refused %s", got, wantRefused)
	}
	stored, err := artifacts.ReadObject(context.Background(), h.openStore(), "main", "data/harbor-tasks.parquet")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := tables.Read(bytes.NewReader(stored), int64(len(stored)), "data/harbor-tasks.parquet", tables.Prompts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].PromptID != "rlpipe/add-numbers" || rows[1].PromptID != "rlpipe/word-stats" ||
		rows[0].Prompt != "Read the two integers in /app/input.txt and write their sum to /app/answer.txt.\n" ||
		rows[0].Metadata != `{"harbor_task":"rlpipe/add-numbers","path":"add-numbers"}` {
		t.Fatalf("rows %+v", rows)
	}

	if err := os.Mkdir(filepath.Join(h.dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.fails(ExitUsage, []string{"dataset harbor: read harbor tasks: open " + filepath.Join(h.dir, "nowhere") + ": no such file or directory: give a directory of Harbor tasks, or one task"},
		"dataset", "harbor", filepath.Join(h.dir, "nowhere"), "main")
	h.fails(ExitUsage, []string{"dataset harbor: read harbor tasks: " + filepath.Join(h.dir, "empty") + " holds no task rlpipe can run (no subdirectory with a task.toml)"},
		"dataset", "harbor", filepath.Join(h.dir, "empty"), "main")
	h.fails(ExitUsage, []string{"dataset harbor: missing BRANCH, or --out FILE"}, "dataset", "harbor", tasks)
}

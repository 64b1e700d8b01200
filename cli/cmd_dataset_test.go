package cli

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
)

// TestDatasetArithBounds refuses counts it cannot draw, instead of
// drawing forever for more distinct problems than there are.
func TestDatasetArithBounds(t *testing.T) {
	h := newStore(t)
	for _, args := range [][]string{
		{"--train", "0"},
		{"--train", "1000000"},
		{"--heldout", "0"},
	} {
		h.fails(ExitUsage, []string{"--train must be in 1..", "--heldout in 1.."}, append([]string{"dataset", "arith", "main"}, args...)...)
	}
}

// TestDatasetImportHuggingFace imports the splits of datasets written by
// the real Hugging Face `datasets` package (save_to_disk and a hub
// snapshot), and refuses a mapping the dataset cannot satisfy, naming
// the column and the columns present.
func TestDatasetImportHuggingFace(t *testing.T) {
	python := pyvenv.Data.Python(t, "write Hugging Face datasets with the real package")
	dir := t.TempDir()
	var fp map[string]string
	out, err := exec.Command(python, "../environments/datasets/testdata/write_hf.py", dir).Output()
	if err != nil {
		t.Fatalf("write_hf.py: %v", err)
	}
	if err := json.Unmarshal(out, &fp); err != nil {
		t.Fatal(err)
	}
	h := newStore(t)
	var got struct {
		Commit string   `json:"commit"`
		Path   string   `json:"path"`
		Rows   int      `json:"rows"`
		Source string   `json:"source"`
		Split  string   `json:"split"`
		Layout string   `json:"layout"`
		Files  []string `json:"files"`
	}
	h.json(&got, "dataset", "import", filepath.Join(dir, "dict"), "main:data/gsm8k-test.parquet", "--split", "test", "--name", "gsm8k", "--answer-format", "gsm8k")
	if got.Rows != 1 || got.Split != "test" || got.Layout != "save_to_disk" || !strings.HasPrefix(got.Source, "gsm8k@") || len(got.Files) != 1 {
		t.Fatalf("import of a DatasetDict's test split: %+v", got)
	}
	snap := filepath.Join(dir, "hub", "datasets--openai--gsm8k", "snapshots", "e53f048856ff4f594e959d75785d2c2d37b678ee")
	line := h.ok("dataset", "import", snap, "main:data/gsm8k.parquet", "--answer-format", "gsm8k")
	if !strings.Contains(line, "3 prompts of openai/gsm8k@e53f048856ff4f594e959d75785d2c2d37b678ee (split train, 1 files) at main:data/gsm8k.parquet") {
		t.Fatalf("import of a snapshot: %s", line)
	}
	h.fails(ExitFailure, []string{`no column "problem" (columns: question, answer, level)`}, "dataset", "import", snap, "main:data/x.parquet", "--question", "problem")
	h.fails(ExitFailure, []string{`no split "validation" (dataset_dict.json lists train, test)`}, "dataset", "import", filepath.Join(dir, "dict"), "main:data/x.parquet", "--split", "validation")
}

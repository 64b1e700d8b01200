package datasets_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments/datasets"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// hfFixture writes small datasets with the real Hugging Face `datasets`
// package (testdata/write_hf.py, in the venv scripts/data-venv.sh makes:
// `make deps` runs it) and returns their directory and fingerprints. The
// test is skipped, saying so, without the venv.
func hfFixture(t *testing.T) (dir string, fp map[string]string) {
	t.Helper()
	python := pyvenv.Data.Python(t, "write Hugging Face datasets with the real package")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, python, "testdata/write_hf.py", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("testdata/write_hf.py: %v\n%s", err, stderr.Bytes())
	}
	if err := json.Unmarshal(stdout.Bytes(), &fp); err != nil {
		t.Fatal(err)
	}
	return dir, fp
}

// TestHuggingFaceLayouts reads the same rows from the layouts datasets'
// save_to_disk and a hub repository snapshot have, with the provenance
// each gives: name, split and revision (the fingerprint, or the
// snapshot's commit).
func TestHuggingFaceLayouts(t *testing.T) {
	dir, fp := hfFixture(t)
	gsm := &datasets.Options{AnswerFormat: datasets.AnswerGSM8K}
	load := func(sub string, hf *datasets.HFOptions) (*datasets.HFDataset, []tables.Prompt) {
		t.Helper()
		d, err := datasets.OpenHF(filepath.Join(dir, sub), hf)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := d.Load(gsm)
		if err != nil {
			t.Fatal(err)
		}
		return d, rows
	}
	saved, savedRows := load("saved", &datasets.HFOptions{Name: "gsm8k"})
	if saved.Layout != datasets.LayoutSaved || saved.Revision != fp["saved"] || saved.Source() != "gsm8k@"+fp["saved"] ||
		!reflect.DeepEqual(saved.Files, []string{"data-00000-of-00001.arrow"}) || !strings.HasPrefix(saved.Digests["data-00000-of-00001.arrow"], "sha256:") {
		t.Fatalf("save_to_disk: %+v (fingerprints %v)", saved, fp)
	}
	if len(savedRows) != 3 {
		t.Fatalf("rows: %+v", savedRows)
	}
	r := savedRows[1]
	if r.Prompt != "Tom has 3 apples and buys 5. How many?" || r.Answer != "8" || r.Source != "gsm8k@"+fp["saved"] || r.Split != "train" ||
		r.Metadata != `{"level":2,"reasoning":"3 + 5 = 8"}` || !strings.HasPrefix(r.PromptID, "gsm8k-") {
		t.Fatalf("row 1: %+v", r)
	}

	// A DatasetDict: the split chosen, its own fingerprint.
	dict, dictRows := load("dict", &datasets.HFOptions{Name: "gsm8k", Split: "test"})
	if dict.Split != "test" || !reflect.DeepEqual(dict.Files, []string{"test/data-00000-of-00001.arrow"}) || len(dictRows) != 1 ||
		dictRows[0].Split != "test" || dictRows[0].Answer != "4" {
		t.Fatalf("dataset dict: %+v %+v", dict, dictRows)
	}

	// A hub snapshot: the name and the revision come from its path.
	snap := filepath.Join("hub", "datasets--openai--gsm8k", "snapshots", "e53f048856ff4f594e959d75785d2c2d37b678ee")
	repo, repoRows := load(snap, nil)
	if repo.Layout != datasets.LayoutRepository || repo.Name != "openai/gsm8k" || repo.Revision != "e53f048856ff4f594e959d75785d2c2d37b678ee" ||
		!reflect.DeepEqual(repo.Files, []string{"data/train-00000-of-00001.parquet"}) {
		t.Fatalf("repository snapshot: %+v", repo)
	}
	// The same rows as save_to_disk's, but for the source (and the ids,
	// whose prefix is the dataset's name).
	for i := range repoRows {
		a, b := repoRows[i], savedRows[i]
		if a.Prompt != b.Prompt || a.Answer != b.Answer || a.Metadata != b.Metadata || a.Split != b.Split ||
			a.Source != "openai/gsm8k@e53f048856ff4f594e959d75785d2c2d37b678ee" || !strings.HasPrefix(a.PromptID, "openai/gsm8k-") {
			t.Fatalf("row %d: snapshot %+v, save_to_disk %+v", i, a, b)
		}
	}

	// A chat dataset: the prompt is the messages.
	chat, err := datasets.OpenHF(filepath.Join(dir, "chat"), nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := chat.Load(&datasets.Options{Fields: datasets.Fields{Messages: "messages"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []tables.Message{{Role: "system", Content: "Answer with a number."}, {Role: "user", Content: "2+2?"}}
	if len(msgs) != 2 || !reflect.DeepEqual(msgs[0].Messages, want) || msgs[0].Prompt != "" || msgs[0].Answer != "4" ||
		chat.Name != "chat" || msgs[0].Source != "chat@"+fp["chat"] || msgs[0].Metadata != "{}" {
		t.Fatalf("chat: %+v %+v", chat, msgs)
	}
}

// TestHuggingFaceFaults: each way a directory or a mapping can be wrong
// is an error naming what is wrong and what is there.
func TestHuggingFaceFaults(t *testing.T) {
	dir, _ := hfFixture(t)
	open := func(sub string, hf *datasets.HFOptions) (*datasets.HFDataset, error) {
		return datasets.OpenHF(filepath.Join(dir, sub), hf)
	}
	mustOpen := func(sub string) *datasets.HFDataset {
		d, err := open(sub, nil)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	bare := t.TempDir()
	if err := os.WriteFile(filepath.Join(bare, "notes.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join("hub", "datasets--openai--gsm8k", "snapshots", "e53f048856ff4f594e959d75785d2c2d37b678ee")
	cases := []struct {
		name string
		err  func() error
		want []string
	}{
		{"a mapped column the dataset lacks", func() error {
			_, err := mustOpen("saved").Load(&datasets.Options{Fields: datasets.Fields{Question: "problem"}})
			return err
		}, []string{`data-00000-of-00001.arrow: no column "problem" (columns: question, answer, level)`, "--question"}},
		{"the same in a snapshot's Parquet", func() error {
			_, err := mustOpen(snap).Load(&datasets.Options{Fields: datasets.Fields{Answer: "solution"}})
			return err
		}, []string{`train-00000-of-00001.parquet: no column "solution" (columns: question, answer, level)`}},
		{"a split the dict does not have", func() error {
			_, err := open("dict", &datasets.HFOptions{Split: "validation"})
			return err
		}, []string{`no split "validation" (dataset_dict.json lists train, test)`, "--split"}},
		{"a split the snapshot does not have", func() error {
			_, err := open(snap, &datasets.HFOptions{Split: "validation"})
			return err
		}, []string{`no Parquet file of the split "validation"`, "data/test-00000-of-00001.parquet, data/train-00000-of-00001.parquet"}},
		{"not a dataset", func() error {
			_, err := datasets.OpenHF(bare, nil)
			return err
		}, []string{"not a Hugging Face dataset: no dataset_dict.json or state.json"}},
		{"messages that are not messages", func() error {
			_, err := mustOpen("saved").Load(&datasets.Options{Fields: datasets.Fields{Messages: "question"}})
			return err
		}, []string{`row 0 column "question": want a non-empty list of {role, content} messages, found What is 2+2?`}},
		{"a GSM8K answer without ####", func() error {
			_, err := mustOpen("chat").Load(&datasets.Options{Fields: datasets.Fields{Messages: "messages"}, AnswerFormat: datasets.AnswerGSM8K})
			return err
		}, []string{`row 0 column "answer"`, "####"}},
	}
	for _, tc := range cases {
		err := tc.err()
		if err == nil || !errors.Is(err, datasets.ErrInvalid) {
			t.Errorf("%s: %v, want an ErrInvalid", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to say %q", tc.name, err, w)
			}
		}
	}
}

// TestImportHuggingFace puts a split into a store with its provenance:
// every data file's digest under the dataset's name, and the source
// NAME@REVISION on every row.
func TestImportHuggingFace(t *testing.T) {
	dir, fp := hfFixture(t)
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	c, n, d, err := datasets.ImportHF(ctx, st, "main", "data/gsm8k.parquet", filepath.Join(dir, "dict"), &datasets.HFOptions{Name: "gsm8k"},
		&datasets.ImportOptions{Load: datasets.Options{AnswerFormat: datasets.AnswerGSM8K}})
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 || d.Revision == "" || c.Message != "datasets: import gsm8k@"+d.Revision+" split train (3 prompts, save_to_disk) to data/gsm8k.parquet" {
		t.Fatalf("import: %d rows, %+v, commit %q (fingerprints %v)", n, d, c.Message, fp)
	}
	info, err := st.StatObject(ctx, "main", "data/gsm8k.parquet")
	if err != nil {
		t.Fatal(err)
	}
	prov, _, err := artifacts.ProvenanceFromMetadata(info.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	if prov.Task != datasets.ImportTask || prov.Inputs["gsm8k/train/data-00000-of-00001.arrow"] != d.Digests["train/data-00000-of-00001.arrow"] || len(prov.Inputs) != 1 {
		t.Fatalf("provenance: %+v", prov)
	}
	rows := standintest.ReadRows(t, st, "main", "data/gsm8k.parquet", tables.Prompts)
	if len(rows) != 3 || rows[2].Answer != "3" || rows[2].Source != "gsm8k@"+d.Revision {
		t.Fatalf("stored rows: %+v", rows)
	}
}

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// uiTokenizer reads the tokenizer --tokenizer names, else the one the
// run's openai policy names in its tokenizer key; a path that is not
// there fails naming the path and the flag or key.
func TestUITokenizer(t *testing.T) {
	dir := t.TempDir()
	tokPath := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(tokPath, []byte(`{"model":{"type":"BPE","vocab":{"Ġhi":0}},"decoder":{"type":"ByteLevel"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join("..", "examples", "arithmetic-vllm", "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	withKey := func(path string) []byte {
		out := strings.Replace(string(example), "  retries: 4\n", "  retries: 4\n  tokenizer: "+path+"\n", 1)
		if out == string(example) {
			t.Fatal("the example's policy section moved: update this test")
		}
		return []byte(out)
	}
	missing := filepath.Join(dir, "nope")
	for _, tc := range []struct {
		name     string
		flag     string
		recorded []byte
		want     string // the text of id 0; "" for no speller
		wantErr  string
	}{
		{"flag", tokPath, nil, " hi", ""},
		{"flag, a model directory", dir, example, " hi", ""},
		{"key", "", withKey(tokPath), " hi", ""},
		{"key, a model directory", "", withKey(dir), " hi", ""},
		{"no key", "", example, "", ""},
		{"no recorded config", "", nil, "", ""},
		{"flag overrides the key", tokPath, withKey(missing), " hi", ""},
		{"key names no file", "", withKey(missing), "",
			"policy.tokenizer of run/config.yaml: read tokenizer " + missing + ": no such file or directory: tokenizer not found: fix the key (relative paths are taken from where rlpipe ui runs), or pass rlpipe ui --tokenizer PATH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			find, err := uiTokenizer(tc.flag)
			if err != nil {
				t.Fatal(err)
			}
			sp, err := find(tc.recorded)
			if msg := errText(err); msg != tc.wantErr {
				t.Fatalf("error %q\nwant  %q", msg, tc.wantErr)
			}
			switch {
			case tc.want == "" && sp != nil:
				t.Errorf("a speller, want none")
			case tc.want != "" && (sp == nil || sp.TokenText(0) != tc.want):
				t.Errorf("speller %v, want one spelling id 0 %q", sp, tc.want)
			}
		})
	}
	_, err = uiTokenizer(missing)
	if want := "ui --tokenizer: read tokenizer " + missing + ": no such file or directory: tokenizer not found: name a tokenizer.json or a Hugging Face model directory holding one"; errText(err) != want {
		t.Errorf("--tokenizer %s: error %q\nwant %q", missing, errText(err), want)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

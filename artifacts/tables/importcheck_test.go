package tables

import (
	"errors"
	"strings"
	"testing"
)

// TestImportRefuses: text that is not UTF-8 is refused at import naming
// the line, the column and the byte (JSONL stored it as U+FFFD; CSV
// stored it as is, and the Parquet file could not be read back), and a
// prompt_id that repeats is refused naming both lines (it was accepted and
// failed only at the reward stage). Each is a *ValueError (ErrBadValue).
func TestImportRefuses(t *testing.T) {
	const prompt = `{"prompt_id":"ID","prompt":"TEXT","answer":"1","metadata":"{}","source":"s","split":"train"}` + "\n"
	row := func(id, text string) string {
		return strings.NewReplacer("ID", id, "TEXT", text).Replace(prompt)
	}
	const utf8Next = "convert the file to UTF-8 first (for Latin-1 text: iconv -f latin1 -t utf-8 FILE > FILE.utf8)"
	for _, c := range []struct {
		name string
		in   string
		opts ImportOptions
		want string
	}{
		{"latin-1 in a jsonl value", row("p1", "ok") + row("p2", "caf\xe9"), ImportOptions{Table: PromptsName},
			`import in line 2 column "prompt": want UTF-8 text, found "caf\xe9": byte 0xe9 at byte 32 of the line is not UTF-8; ` + utf8Next},
		{"latin-1 in an indented jsonl line, inferred schema", "{\"a\":1}\n  {\"a\":2,\"b\":\"na\xefve\"}\n", ImportOptions{},
			`import in line 2 column "b": want UTF-8 text, found "na\xefve": byte 0xef at byte 17 of the line is not UTF-8; ` + utf8Next},
		{"latin-1 in a jsonl key", "{\"caf\xe9\":1}\n", ImportOptions{},
			"import in line 1 column \"caf\ufffd\": want UTF-8 text, found \"1\": byte 0xe9 at byte 6 of the line is not UTF-8; " + utf8Next},
		{"latin-1 in a csv cell", "prompt_id,prompt,answer,metadata,source,split\np1,caf\xe9,1,{},s,t\n", ImportOptions{Table: PromptsName, Format: CSV},
			`import in line 2 column "prompt": want UTF-8 text, found "caf\xe9": byte 0xe9 at byte 7 of the line is not UTF-8; ` + utf8Next},
		{"latin-1 in a csv header", "id,caf\xe9\n1,2\n", ImportOptions{Format: CSV},
			`import in line 1 column "caf\xe9": want UTF-8 text, found "caf\xe9": byte 0xe9 at byte 7 of the line is not UTF-8; ` + utf8Next},
		{"a repeated prompt_id", row("p1", "a") + row("p2", "b") + row("p1", "c"), ImportOptions{Table: PromptsName},
			`import in line 3 column "prompt_id": "p1" is also the prompt_id of line 1, and prompt_id is unique in a prompts table: give each row its own prompt_id, or remove one of the two rows`},
		{"a repeated prompt_id in csv", "prompt_id,prompt,answer,metadata,source,split\np1,a,1,{},s,t\np2,b,1,{},s,t\n\"p2\",c,1,{},s,t\n", ImportOptions{Table: PromptsName, Format: CSV},
			`import in line 4 column "prompt_id": "p2" is also the prompt_id of line 3, and prompt_id is unique in a prompts table: give each row its own prompt_id, or remove one of the two rows`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := importText(t, c.in, &c.opts)
			var ve *ValueError
			if !errors.As(err, &ve) || !errors.Is(err, ErrBadValue) || err.Error() != c.want {
				t.Fatalf("err = %v\nwant  %s", err, c.want)
			}
		})
	}
	t.Run("ids need not be unique in other tables", func(t *testing.T) {
		const traj = "prompt_id,sample_index\np1,0\np1,1\n"
		_, err := importText(t, traj, &ImportOptions{Format: CSV})
		if err != nil {
			t.Fatal(err)
		}
	})
}

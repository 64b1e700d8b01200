package server

import (
	"context"
	"math"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// A chunk that cannot be encoded after the stream started ends it with
// OpenAI's error event and [DONE]; nothing is written after it.
func TestStreamErrorEvent(t *testing.T) {
	rec := httptest.NewRecorder()
	ev := newEvents(rec, context.Background())
	if !ev.send(map[string]int{"a": 1}) {
		t.Fatal("the first chunk failed")
	}
	if ev.send(math.NaN()) {
		t.Fatal("a NaN chunk was sent")
	}
	if ev.send(map[string]int{"b": 2}) {
		t.Fatal("a chunk was sent after the error")
	}
	ev.done()
	want := `data: {"a":1}` + "\n\n" +
		`data: {"error":{"message":"encode a stream chunk: json: unsupported value: NaN","type":"server_error","param":null,"code":null}}` + "\n\n" +
		"data: [DONE]\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("stream\n%s\nwant\n%s", got, want)
	}
	if ev.err == nil || !strings.Contains(ev.err.Error(), "NaN") {
		t.Errorf("the stream's error is %v", ev.err)
	}
}

// pieces cuts a text into one piece per token that add up to it: a
// special token adds nothing, the last token takes what a stop string
// left of it, and no piece splits a character.
func TestPieces(t *testing.T) {
	spell := texter{1: "a", 2: "bc", 3: "<eos>", 4: "\xe4\xb8", 5: "\x96", 6: "<"}
	for _, tc := range []struct {
		text string
		ids  []int32
		want []string
	}{
		{"abc", []int32{1, 2, 3}, []string{"a", "bc", ""}},
		{"ab", []int32{1, 2}, []string{"a", "b"}},        // a stop string after b
		{"a<", []int32{1, 3, 6}, []string{"a", "", "<"}}, // <eos> mid-text adds nothing
		{"世", []int32{4, 5}, []string{"", "世"}},          // byte tokens of one character
		{"a世", []int32{1, 4}, []string{"a", "世"}},        // the last token takes the rest
		{"x", []int32{1, 2}, []string{"", "x"}},          // spellings the text does not follow
		{"", nil, []string{""}},
	} {
		got := pieces(tc.text, tc.ids, spell)
		if strings.Join(got, "") != tc.text || !slices.Equal(got, tc.want) {
			t.Errorf("pieces(%q, %v) = %q, want %q", tc.text, tc.ids, got, tc.want)
		}
	}
	if got := pieces("abc", []int32{1, 2}, nil); !slices.Equal(got, []string{"abc"}) {
		t.Errorf("without a TokenTexter: %q", got)
	}
}

type texter map[int32]string

func (t texter) TokenText(id int32) string { return t[id] }

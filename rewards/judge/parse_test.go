package judge

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseScore(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		pattern    string
		lo, hi     float64
		score      float64
		status     string
	}{
		{name: "score line", text: "Score: 0.8", hi: 1, score: 0.8, status: StatusOK},
		{name: "lower case equals", text: "final score = 1", hi: 1, score: 1, status: StatusOK},
		{name: "markdown bold", text: "**Score**: 0.5", hi: 1, score: 0.5, status: StatusOK},
		{name: "markdown bold colon inside", text: "**Score:** 0.5", hi: 1, score: 0.5, status: StatusOK},
		{name: "leading dot", text: "Score: .5", hi: 1, score: 0.5, status: StatusOK},
		{name: "json", text: `{"score": 1, "why": "ok"}`, hi: 1, score: 1, status: StatusOK},
		{name: "json quoted", text: `{"score":"0.25"}`, hi: 1, score: 0.25, status: StatusOK},
		{name: "last explicit wins", text: "Score: 1\nRevised score: 0", hi: 1, score: 0, status: StatusOK},
		{name: "explicit beats bare", text: "Score: 0.2\n\n1", hi: 1, score: 0.2, status: StatusOK},
		{name: "explicit out of range", text: "Score: 8/10", hi: 1, score: 8, status: StatusOutOfRange},
		{name: "negative out of range", text: "Score: -0.5", hi: 1, score: -0.5, status: StatusOutOfRange},
		{name: "bare last in range", text: "Steps 1 to 3 are fine; I give it 0.9.", hi: 1, score: 0.9, status: StatusOK},
		{name: "bare skips out of range", text: "0.5 overall, see 42", hi: 1, score: 0.5, status: StatusOK},
		{name: "bare fraction numerator", text: "7/10", hi: 10, score: 7, status: StatusOK},
		{name: "bare not in words", text: "gpt4 says 1", hi: 1, score: 1, status: StatusOK},
		{name: "bare not a version", text: "v1.0.1", hi: 1, status: StatusUnparseable},
		{name: "bare not thousands", text: "1,000", hi: 1, status: StatusUnparseable},
		{name: "bare negative", text: "-1", lo: -1, hi: 1, score: -1, status: StatusOK},
		{name: "thoughts skipped", text: "<think>Score: 1</think>It is wrong. Score: 0", hi: 1, score: 0, status: StatusOK},
		{name: "only thoughts", text: "<think>Score: 1</think>", hi: 1, status: StatusUnparseable},
		{name: "garbage", text: "I refuse to grade.", hi: 1, status: StatusUnparseable},
		{name: "empty", text: " \n", hi: 1, status: StatusUnparseable},
		{name: "pattern", text: "[[4]] then [[5]]", pattern: `\[\[(\d+)\]\]`, lo: 1, hi: 5, score: 5, status: StatusOK},
		{name: "pattern out of range", text: "[[9]]", pattern: `\[\[(\d+)\]\]`, lo: 1, hi: 5, score: 9, status: StatusOutOfRange},
		{name: "pattern no match", text: "Score: 1", pattern: `\[\[(\d+)\]\]`, hi: 1, status: StatusUnparseable},
		{name: "pattern not a number", text: "grade=A", pattern: `grade=(\w)`, hi: 1, status: StatusUnparseable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var re *regexp.Regexp
			if tc.pattern != "" {
				re = regexp.MustCompile(tc.pattern)
			}
			score, status, reason := parseScore(tc.text, re, tc.lo, tc.hi)
			if score != tc.score || status != tc.status || (status == StatusOK) != (reason == "") {
				t.Fatalf("parseScore(%q) = %g, %s, %q; want %g, %s", tc.text, score, status, reason, tc.score, tc.status)
			}
		})
	}
}

func TestExcerpt(t *testing.T) {
	long := strings.Repeat("é", 1000) + "Score: 1"
	got := excerpt(long, 100)
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "Score: 1") || len(got) > 110 {
		t.Fatalf("excerpt = %q (%d bytes)", got, len(got))
	}
	if excerpt("short", 100) != "short" {
		t.Fatal("a short text is kept whole")
	}
}

func FuzzParseScore(f *testing.F) {
	for _, s := range []string{"Score: 0.5", `{"score": 2}`, "7/10", "v1.2.3 -4 +.5", "<think>1</think>0", "**Score:** 1e9", "-", "1,2.3/4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		score, status, reason := parseScore(text, nil, 0, 10)
		switch status {
		case StatusOK:
			if score < 0 || score > 10 || reason != "" {
				t.Fatalf("ok %g (%q) outside [0, 10]", score, reason)
			}
		case StatusOutOfRange:
			if score >= 0 && score <= 10 {
				t.Fatalf("out_of_range with %g", score)
			}
		case StatusUnparseable:
			if reason == "" {
				t.Fatal("unparseable without a reason")
			}
		default:
			t.Fatalf("status %q", status)
		}
	})
}

package judge

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Statuses of a Result.
const (
	StatusOK          = "ok"           // a score within [Min, Max]
	StatusUnparseable = "unparseable"  // no score found in the output
	StatusOutOfRange  = "out_of_range" // a score outside [Min, Max]
	StatusRefused     = "refused"      // the model refused or its output was filtered
	StatusError       = "error"        // no answer: Score returned an error
)

// explicitScore finds "Score: 7", "**Score:** 0.5", "score = 3" and
// "score": 0.8 (JSON, the number possibly quoted).
var explicitScore = regexp.MustCompile(`(?i)(?:"score"\s*:\s*"?|\bscore\b[*_\s]*[:=][*_\s]*)([-+]?(?:\d+(?:\.\d+)?|\.\d+))`)

// parseScore reads a score out of a judge's output. pattern nil means the
// default: the last explicit score, else the last bare number in range.
func parseScore(text string, pattern *regexp.Regexp, lo, hi float64) (score float64, status, reason string) {
	if i := strings.LastIndex(text, "</think>"); i >= 0 {
		text = text[i+len("</think>"):] // a reasoning model's answer follows its thoughts
	}
	if strings.TrimSpace(text) == "" {
		return 0, StatusUnparseable, "the output is empty"
	}
	inRange := func(v float64) bool { return v >= lo && v <= hi }
	judged := func(v float64) (float64, string, string) {
		if !inRange(v) {
			return v, StatusOutOfRange, fmt.Sprintf("score %g is outside [%g, %g]", v, lo, hi)
		}
		return v, StatusOK, ""
	}
	if pattern != nil {
		m := pattern.FindAllStringSubmatch(text, -1)
		if len(m) == 0 {
			return 0, StatusUnparseable, fmt.Sprintf("score_pattern %q does not match the output", pattern.String())
		}
		s := strings.TrimSpace(m[len(m)-1][1])
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, StatusUnparseable, fmt.Sprintf("score_pattern matched %q, which is not a number", excerpt(s, 40))
		}
		return judged(v)
	}
	if m := explicitScore.FindAllStringSubmatch(text, -1); len(m) > 0 {
		v, err := strconv.ParseFloat(m[len(m)-1][1], 64)
		if err == nil {
			return judged(v)
		}
	}
	nums := bareNumbers(text)
	for i := len(nums) - 1; i >= 0; i-- {
		if inRange(nums[i]) {
			return nums[i], StatusOK, ""
		}
	}
	if len(nums) > 0 {
		return 0, StatusUnparseable, fmt.Sprintf("no \"Score: N\" and no number within [%g, %g] in the output (the last number is %g)", lo, hi, nums[len(nums)-1])
	}
	return 0, StatusUnparseable, "no score in the output: make the rubric ask for \"Score: <number>\""
}

// bareNumbers returns the numbers standing alone in text: not part of a
// word (gpt4), a version (1.2.3) or a denominator (the 10 of 7/10).
func bareNumbers(text string) []float64 {
	var out []float64
	isWord := func(b byte) bool {
		return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= utf8.RuneSelf
	}
	isDigit := func(i int) bool { return i < len(text) && text[i] >= '0' && text[i] <= '9' }
	for i := 0; i < len(text); {
		start := i
		if (text[i] == '-' || text[i] == '+') && isDigit(i+1) {
			i++
		}
		if !isDigit(i) {
			i = start + 1
			continue
		}
		if start > 0 {
			if p := text[start-1]; isWord(p) || p == '.' || p == '/' || p == ',' {
				for i < len(text) && (isWord(text[i]) || text[i] == '.' && isDigit(i+1)) {
					i++ // skip the rest of the token
				}
				continue
			}
		}
		for isDigit(i) {
			i++
		}
		if i < len(text) && text[i] == '.' && isDigit(i+1) {
			i++
			for isDigit(i) {
				i++
			}
		}
		end := i
		if i < len(text) && (isWord(text[i]) || text[i] == '.' && isDigit(i+1) || text[i] == ',' && isDigit(i+1)) {
			for i < len(text) && (isWord(text[i]) || (text[i] == '.' || text[i] == ',') && isDigit(i+1)) {
				i++
			}
			continue
		}
		if v, err := strconv.ParseFloat(text[start:end], 64); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// excerpt caps s at about n bytes, keeping its head and its tail (where a
// judge usually puts the score), cut at rune boundaries.
func excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head, tail := n/4, n-n/4
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	t := len(s) - tail
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return s[:head] + " … " + s[t:]
}

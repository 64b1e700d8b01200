package rewards

import (
	"math"
	"strconv"
	"strings"
	"sync"
)

// The Go functions behind the CEL library. They never panic and never
// fail: a text without an answer gives "" (or false), which a reward
// expression turns into 0 on purpose.

// ExtractAnswer returns the final answer of a completion: the content of
// the last \boxed{…} (nested braces balanced), else the text after the
// last "####" up to the end of its line, else the last number (see
// LastNumber), else "". Surrounding spaces are trimmed. The result is a
// substring of s: no copy.
func ExtractAnswer(s string) string { return extractAnswer(s, nil) }

// extractAnswer is ExtractAnswer, finding the markers with m (nil: by
// searching s).
func extractAnswer(s string, m *textMarks) string {
	if b, ok := extractBoxed(s, m); ok {
		return b
	}
	if i := m.lastIndex(s, len(s), "####"); i >= 0 {
		rest := s[i+4:]
		if j := strings.IndexByte(rest, '\n'); j >= 0 {
			rest = rest[:j]
		}
		if rest = strings.TrimSpace(rest); rest != "" {
			return rest
		}
	}
	return LastNumber(s)
}

// ExtractBoxed returns the trimmed content of the last \boxed{…} or
// \fbox{…} of s whose braces balance, or "" when there is none.
func ExtractBoxed(s string) string {
	b, _ := extractBoxed(s, nil)
	return b
}

func extractBoxed(s string, m *textMarks) (string, bool) {
	end := len(s)
	for end > 0 {
		i, n := lastBoxMarker(s, end, m)
		if i < 0 {
			return "", false
		}
		j := i + n
		for j < len(s) && s[j] == ' ' {
			j++
		}
		if j < len(s) && s[j] == '{' {
			if c, ok := balanced(s[j:]); ok {
				return strings.TrimSpace(c), true
			}
		}
		end = i
	}
	return "", false
}

// lastBoxMarker finds the last \boxed or \fbox in s[:end] and its length.
func lastBoxMarker(s string, end int, m *textMarks) (int, int) {
	i := m.lastIndex(s, end, `\boxed`)
	k := m.lastIndex(s, end, `\fbox`)
	if k > i {
		return k, len(`\fbox`)
	}
	return i, len(`\boxed`)
}

// lastIndex is strings.LastIndex for needles that are rare in s: it
// searches forwards with the vectorised strings.Index, several times
// faster than the byte-by-byte backward scan of strings.LastIndex.
func lastIndex(s, sub string) int {
	i := strings.Index(s, sub)
	if i < 0 {
		return -1
	}
	for {
		j := strings.Index(s[i+1:], sub)
		if j < 0 {
			return i
		}
		i += 1 + j
	}
}

// textMarks are the positions of the bytes that begin the markers the
// answer functions look for (`\` of \boxed and \fbox, `#` of "####"),
// found in one pass per byte. The functions that read a completion —
// extract_answer and a contains or two — then look up those positions
// rather than search the whole text four to five times. A nil *textMarks
// searches instead.
type textMarks struct {
	backslash, hash []int
}

// scan records the positions in s.
func (m *textMarks) scan(s string) {
	m.backslash = positions(m.backslash[:0], s, '\\')
	m.hash = positions(m.hash[:0], s, '#')
}

// positions appends the positions of c in s to to.
func positions(to []int, s string, c byte) []int {
	for i := 0; ; {
		j := strings.IndexByte(s[i:], c)
		if j < 0 {
			return to
		}
		to = append(to, i+j)
		i += j + 1
	}
}

// of returns the positions of c, or false when c is not a byte m records.
func (m *textMarks) of(c byte) ([]int, bool) {
	switch c {
	case '\\':
		return m.backslash, true
	case '#':
		return m.hash, true
	}
	return nil, false
}

// lastIndex is strings.LastIndex(s[:end], sub) for a non-empty sub, s
// the text m was scanned from.
func (m *textMarks) lastIndex(s string, end int, sub string) int {
	if m == nil {
		return lastIndex(s[:end], sub)
	}
	at, ok := m.of(sub[0])
	if !ok {
		return lastIndex(s[:end], sub)
	}
	for k := len(at) - 1; k >= 0; k-- {
		if i := at[k]; i+len(sub) <= end && s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// contains is strings.Contains(s, sub), s the text m was scanned from.
func (m *textMarks) contains(s, sub string) bool {
	if sub == "" {
		return true
	}
	at, ok := m.of(sub[0])
	if !ok {
		return strings.Contains(s, sub)
	}
	for _, i := range at {
		if strings.HasPrefix(s[i:], sub) {
			return true
		}
	}
	return false
}

// balanced returns what lies between s[0] == '{' and its matching brace.
func balanced(s string) (string, bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return s[1:i], true
			}
		}
	}
	return "", false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnum(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

// LastNumber returns the last number written in s, as written: digits
// with an optional leading minus, thousands separators (a comma followed
// by exactly three digits) and a decimal part ("-1,234.5"). It returns ""
// when s has no digit. The result is a substring of s.
func LastNumber(s string) string {
	end := len(s)
	for end > 0 && !isDigit(s[end-1]) {
		end--
	}
	if end == 0 {
		return ""
	}
	start := end
	run := 0          // digits since the last separator, scanning backwards
	sawSep := false   // a '.' or ',' was taken
	sawComma := false // a ',' was taken: no '.' may come before it
	for start > 0 {
		c := s[start-1]
		switch {
		case isDigit(c):
			start--
			run++
			continue
		case c == '.' && !sawSep && start >= 2 && isDigit(s[start-2]):
			start--
			sawSep, run = true, 0
			continue
		case c == ',' && run == 3 && start >= 2 && isDigit(s[start-2]):
			start--
			sawSep, sawComma, run = true, true, 0
			continue
		}
		break
	}
	if !sawSep && !sawComma && start >= 1 && s[start-1] == '.' && (start == 1 || !isDigit(s[start-2])) {
		start-- // ".5"
	}
	if start >= 1 && s[start-1] == '-' && (start == 1 || !isAlnum(s[start-2])) {
		start--
	}
	return s[start:end]
}

// currencies are the prefixes ParseNumber drops before a number.
var currencies = []string{`\$`, "$", "€", "£", "¥", "₹"}

// ParseNumber reads a number written the way answers are written:
//
//   - spaces around it are ignored, and so is one currency sign before it
//     ($, \$, €, £, ¥, ₹), after an optional sign: "-$1,234.50" is -1234.5;
//   - thousands separators are commas followed by exactly three digits:
//     "1,234" is 1234, "1,23" is not a number;
//   - a decimal part and an exponent are allowed: "3.5", ".5", "1e-3";
//   - a fraction a/b or \frac{a}{b} (also \dfrac, \tfrac) is divided out;
//   - any text after the number is ignored if it holds no digit: units
//     ("12 km"), a trailing period, a closing "$". A percent sign is
//     dropped, not divided: "50%" is 50, since datasets write percentages
//     as the number before the sign.
//
// ok is false for anything else ("", "abc", "3 or 4", "1.2.3"), and the
// value is never NaN or infinite.
func ParseNumber(s string) (v float64, ok bool) {
	if v, ok := parsePlain(s); ok {
		return v, true
	}
	return parseNumber(s)
}

// pow10 are the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parsePlain is ParseNumber's fast path, for the way most answers are
// written: digits with thousands separators and a decimal part, nothing
// else ("1,234.5"), at most 15 digits. ok is false for anything else,
// which parseNumber then reads. The value is what strconv.ParseFloat
// gives, bit for bit: the digits make an integer below 2^53 and the
// power of ten is exact, so one division rounds correctly.
func parsePlain(s string) (float64, bool) {
	if s == "" || !isDigit(s[0]) {
		return 0, false
	}
	var m uint64
	digits, frac := 0, -1 // frac: digits after the point; -1 before it
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isDigit(c):
			m = m*10 + uint64(c-'0')
			digits++
			if frac >= 0 {
				frac++
			}
		case c == ',' && frac < 0:
			// As parseDecimal takes it: three digits, then no fourth.
			if !(i+3 < len(s) && isDigit(s[i+1]) && isDigit(s[i+2]) && isDigit(s[i+3]) && (i+4 == len(s) || !isDigit(s[i+4]))) {
				return 0, false
			}
		case c == '.' && frac < 0 && i+1 < len(s) && isDigit(s[i+1]):
			frac = 0
		default:
			return 0, false
		}
	}
	if digits > 15 {
		return 0, false
	}
	if frac <= 0 {
		return float64(m), true
	}
	return float64(m) / pow10[frac], true
}

// parseNumber is ParseNumber for any text.
func parseNumber(s string) (v float64, ok bool) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "$")
	s = strings.TrimSpace(s)
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = strings.TrimSpace(s[1:])
	}
	for _, c := range currencies {
		if strings.HasPrefix(s, c) {
			s = strings.TrimSpace(s[len(c):])
			break
		}
	}
	if s != "" && (s[0] == '-' || s[0] == '+') && !neg {
		neg = s[0] == '-'
		s = s[1:]
	}
	v, rest, ok := parseFrac(s)
	if !ok || !noDigits(rest) || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// parseFrac reads \frac{a}{b}, a/b or a plain number at the start of s.
func parseFrac(s string) (float64, string, bool) {
	for _, p := range []string{`\frac`, `\dfrac`, `\tfrac`} {
		if !strings.HasPrefix(s, p) {
			continue
		}
		s = s[len(p):]
		num, ok1 := braced(&s)
		den, ok2 := braced(&s)
		if !ok1 || !ok2 {
			return 0, "", false
		}
		a, ok1 := ParseNumber(num)
		b, ok2 := ParseNumber(den)
		if !ok1 || !ok2 || b == 0 {
			return 0, "", false
		}
		return a / b, s, true
	}
	a, rest, ok := parseDecimal(s)
	if !ok {
		return 0, "", false
	}
	if r := strings.TrimLeft(rest, " "); strings.HasPrefix(r, "/") {
		b, rest2, ok := parseDecimal(strings.TrimLeft(r[1:], " "))
		if !ok || b == 0 {
			return 0, "", false
		}
		return a / b, rest2, true
	}
	return a, rest, true
}

// braced takes "{x}" off the front of *s and returns x.
func braced(s *string) (string, bool) {
	t := strings.TrimLeft(*s, " ")
	if t == "" || t[0] != '{' {
		return "", false
	}
	c, ok := balanced(t)
	if !ok {
		return "", false
	}
	*s = t[len(c)+2:]
	return c, true
}

// parseDecimal reads digits with comma groups, a decimal part and an
// exponent at the start of s, and returns the rest.
func parseDecimal(s string) (float64, string, bool) {
	var buf [64]byte
	n := 0
	put := func(c byte) bool {
		if n == len(buf) {
			return false
		}
		buf[n] = c
		n++
		return true
	}
	i := 0
	digits := 0
	for i < len(s) {
		c := s[i]
		if isDigit(c) {
			if !put(c) {
				return 0, "", false
			}
			i++
			digits++
			continue
		}
		// A comma separates thousands only when three digits follow and
		// then no fourth.
		if c == ',' && digits > 0 && i+3 < len(s) && isDigit(s[i+1]) && isDigit(s[i+2]) && isDigit(s[i+3]) && (i+4 == len(s) || !isDigit(s[i+4])) {
			i++
			continue
		}
		break
	}
	if i < len(s) && s[i] == '.' && i+1 < len(s) && isDigit(s[i+1]) {
		put('.')
		i++
		for i < len(s) && isDigit(s[i]) {
			if !put(s[i]) {
				return 0, "", false
			}
			i++
			digits++
		}
	}
	if digits == 0 {
		return 0, "", false
	}
	if i+1 < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if s[j] == '-' || s[j] == '+' {
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			put('e')
			for k := i + 1; k < j; k++ {
				put(s[k])
			}
			for j < len(s) && isDigit(s[j]) {
				if !put(s[j]) {
					return 0, "", false
				}
				j++
			}
			i = j
		}
	}
	v, err := strconv.ParseFloat(string(buf[:n]), 64)
	if err != nil && !isRange(err) {
		return 0, "", false
	}
	return v, s[i:], true
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func noDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			return false
		}
	}
	return true
}

// NumEqual reports whether a and b parse as numbers (ParseNumber) that
// differ by at most tol (an absolute tolerance; a negative tol is 0). It
// is false when either does not parse: never an error.
func NumEqual(a, b string, tol float64) bool {
	x, ok := ParseNumber(a)
	if !ok {
		return false
	}
	y, ok := ParseNumber(b)
	if !ok {
		return false
	}
	return numClose(x, y, tol)
}

func numClose(x, y, tol float64) bool {
	if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
		return x == y && !math.IsNaN(x)
	}
	if !(tol > 0) {
		tol = 0
	}
	return math.Abs(x-y) <= tol
}

// Count returns the number of non-overlapping occurrences of sub in s;
// 0 when sub is empty.
func Count(s, sub string) int {
	if sub == "" {
		return 0
	}
	return strings.Count(s, sub)
}

// DefaultNGram is the n of RepetitionRatio when none is given: word
// 4-grams. Shorter n-grams repeat in ordinary prose ("of the"); a repeated
// 4-gram is rare in prose and common in a completion stuck in a loop.
const DefaultNGram = 4

// RepetitionRatio returns the fraction of the word n-grams of s that
// repeat an earlier n-gram: 0 for text without repeats (or with fewer
// than n words), approaching 1 for text that loops. Words are separated
// by white space and compared exactly.
func RepetitionRatio(s string, n int) float64 {
	if n <= 0 {
		n = DefaultNGram
	}
	st := ngramPool.Get().(*ngramState)
	defer ngramPool.Put(st)
	st.words = st.words[:0]
	for i := 0; i < len(s); {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		j := i
		h := uint64(14695981039346656037)
		for j < len(s) && !isSpace(s[j]) {
			h ^= uint64(s[j])
			h *= 1099511628211
			j++
		}
		if j > i {
			st.words = append(st.words, h)
		}
		i = j
	}
	total := len(st.words) - n + 1
	if total <= 0 {
		return 0
	}
	clear(st.seen)
	repeats := 0
	for i := 0; i < total; i++ {
		h := uint64(n)
		for _, w := range st.words[i : i+n] {
			h = (h ^ w) * 0x9E3779B97F4A7C15
			h ^= h >> 29
		}
		if _, ok := st.seen[h]; ok {
			repeats++
		} else {
			st.seen[h] = struct{}{}
		}
	}
	if len(st.seen) > 1<<16 {
		st.seen = make(map[uint64]struct{})
	}
	return float64(repeats) / float64(total)
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

type ngramState struct {
	words []uint64
	seen  map[uint64]struct{}
}

var ngramPool = sync.Pool{New: func() any { return &ngramState{seen: make(map[uint64]struct{})} }}

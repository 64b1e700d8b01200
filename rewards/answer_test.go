package rewards

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// textCase is a named case of a function from text to text.
type textCase struct{ name, in, want string }

// testText runs f, named fn in the messages, on each case.
func testText(t *testing.T, fn string, f func(string) string, tests []textCase) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := f(tt.in); got != tt.want {
				t.Errorf("%s(%q) = %q, want %q", fn, tt.in, got, tt.want)
			}
		})
	}
}

func TestExtractAnswer(t *testing.T) {
	testText(t, "ExtractAnswer", ExtractAnswer, []textCase{
		{"boxed", `so the answer is \boxed{42}.`, "42"},
		{"boxed nested braces", `\boxed{\frac{1}{2}}`, `\frac{1}{2}`},
		{"last boxed wins", `\boxed{1} then \boxed{2}`, "2"},
		{"fbox", `\fbox{7}`, "7"},
		{"boxed with space", `\boxed {9}`, "9"},
		{"unbalanced boxed falls back", `\boxed{1 and 5`, "5"},
		{"unbalanced last boxed uses earlier", `\boxed{3} \boxed{4`, "3"},
		{"boxed beats hashes", "#### 5\n\\boxed{6}", "6"},
		{"hashes", "work\n#### 72", "72"},
		{"hashes to end of line", "#### 1,234 dollars\nthanks", "1,234 dollars"},
		{"last hashes", "#### 1\n#### 2", "2"},
		{"empty hashes fall back", "3 apples ####", "3"},
		{"last number", "I think 3 then 17.", "17"},
		{"nothing", "no idea", ""},
		{"empty", "", ""},
	})
}

func TestExtractBoxed(t *testing.T) {
	testText(t, "ExtractBoxed", ExtractBoxed, []textCase{
		{"simple", `\boxed{x+1}`, "x+1"},
		{"deep", `\boxed{a{b{c}}d}`, "a{b{c}}d"},
		{"trimmed", `\boxed{ 5 }`, "5"},
		{"empty", `\boxed{}`, ""},
		{"none", `boxed{5}`, ""},
		{"no brace", `\boxed 5`, ""},
	})
}

func TestLastNumber(t *testing.T) {
	testText(t, "LastNumber", LastNumber, []textCase{
		{"integer", "a 12 b", "12"},
		{"negative", "x is -3", "-3"},
		{"hyphen is not minus", "pages 3-5", "5"},
		{"thousands", "total 1,234,567 items", "1,234,567"},
		{"decimal", "pi is 3.14.", "3.14"},
		{"thousands and decimal", "$1,234.50", "1,234.50"},
		{"list is not thousands", "1,2", "2"},
		{"four after comma", "1,2345", "2345"},
		{"leading dot", "about .5", ".5"},
		{"word digits", "x2", "2"},
		{"none", "none", ""},
	})
}

func TestParseNumber(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want float64
		ok   bool
	}{
		{"integer", "42", 42, true},
		{"spaces", "  42 ", 42, true},
		{"negative", "-7", -7, true},
		{"plus", "+7", 7, true},
		{"decimal", "3.25", 3.25, true},
		{"leading dot", ".5", 0.5, true},
		{"exponent", "1e-3", 0.001, true},
		{"thousands", "1,234,567", 1234567, true},
		{"dollars", "$1,234.50", 1234.5, true},
		{"latex dollars", `\$5`, 5, true},
		{"negative dollars", "-$3", -3, true},
		{"euro", "€ 12", 12, true},
		{"unit", "12 km", 12, true},
		{"percent", "50%", 50, true},
		{"latex percent", `50\%`, 50, true},
		{"trailing period", "7.", 7, true},
		{"math mode", "$7$", 7, true},
		{"fraction", "3/4", 0.75, true},
		{"latex fraction", `\frac{1}{4}`, 0.25, true},
		{"dfrac", `\dfrac{3}{2}`, 1.5, true},
		{"zero denominator", "1/0", 0, false},
		{"bad comma group", "1,23", 0, false},
		{"two numbers", "3 or 4", 0, false},
		{"version", "1.2.3", 0, false},
		{"words", "abc", 0, false},
		{"empty", "", 0, false},
		{"sign only", "-", 0, false},
		{"huge", "1e999", 0, false},
		{"nan text", "NaN", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseNumber(tt.in)
			if ok != tt.ok || (ok && math.Abs(got-tt.want) > 1e-12) {
				t.Errorf("ParseNumber(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestNumEqual(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		tol  float64
		want bool
	}{
		{"same", "42", "42", 0, true},
		{"formatting", "$1,000", "1000", 0, true},
		{"within tolerance", "0.3", "0.30000001", 1e-6, true},
		{"outside tolerance", "0.3", "0.31", 1e-6, false},
		{"fraction", `\frac{1}{2}`, "0.5", 1e-9, true},
		{"negative tolerance is zero", "1", "1.0000001", -1, false},
		{"unparseable", "abc", "1", 1, false},
		{"both empty", "", "", 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NumEqual(tt.a, tt.b, tt.tol); got != tt.want {
				t.Errorf("NumEqual(%q, %q, %v) = %v, want %v", tt.a, tt.b, tt.tol, got, tt.want)
			}
		})
	}
}

func TestCount(t *testing.T) {
	tests := []struct {
		name   string
		s, sub string
		want   int
	}{
		{"some", "a-b-c", "-", 2},
		{"non-overlapping", "aaaa", "aa", 2},
		{"none", "abc", "x", 0},
		{"empty sub", "abc", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Count(tt.s, tt.sub); got != tt.want {
				t.Errorf("Count(%q, %q) = %d, want %d", tt.s, tt.sub, got, tt.want)
			}
		})
	}
}

func TestRepetitionRatio(t *testing.T) {
	tests := []struct {
		name string
		s    string
		n    int
		want float64
	}{
		{"no repeats", "a b c d e f g h", 4, 0},
		{"too short", "a b c", 4, 0},
		{"loop", strings.Repeat("go on ", 10), 2, 17.0 / 19.0},
		{"half", "a b a b", 2, 1.0 / 3.0},
		{"default n", "one two three four one two three four", 0, 1.0 / 5.0},
		{"white space", "a\tb\n\na  b", 2, 1.0 / 3.0},
		{"empty", "", 4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RepetitionRatio(tt.s, tt.n); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("RepetitionRatio(%q, %d) = %v, want %v", tt.s, tt.n, got, tt.want)
			}
		})
	}
}

// The extraction functions take model output: anything at all. They must
// never panic, and what they return is part of their input.

func FuzzExtractAnswer(f *testing.F) {
	for _, s := range []string{`\boxed{\frac{1}{2}}`, "#### 12", "1,234.5", `\boxed{`, "-", "", "\xff#### 3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkMarks(t, s)
		a := ExtractAnswer(s)
		if a != "" && !strings.Contains(s, a) {
			t.Fatalf("ExtractAnswer(%q) = %q, not a part of the input", s, a)
		}
		if b := ExtractBoxed(s); b != "" && !strings.Contains(s, b) {
			t.Fatalf("ExtractBoxed(%q) = %q, not a part of the input", s, b)
		}
		if n := LastNumber(s); n != "" {
			if !strings.HasSuffix(s[:strings.LastIndex(s, n)+len(n)], n) {
				t.Fatalf("LastNumber(%q) = %q", s, n)
			}
			if utf8.ValidString(s) && !utf8.ValidString(n) {
				t.Fatalf("LastNumber(%q) = %q cuts a character", s, n)
			}
		}
	})
}

// checkMarks fails t unless the searches through s's markers find what
// the searches of s find.
func checkMarks(t *testing.T, s string) {
	t.Helper()
	var m textMarks
	m.scan(s)
	if got, want := extractAnswer(s, &m), ExtractAnswer(s); got != want {
		t.Fatalf("extractAnswer(%q) with markers = %q, want %q", s, got, want)
	}
	if got, _ := extractBoxed(s, &m); got != ExtractBoxed(s) {
		t.Fatalf("extractBoxed(%q) with markers = %q, want %q", s, got, ExtractBoxed(s))
	}
	for _, sub := range []string{"####", `\boxed{`, `\boxed`, `\fbox`, "#", `\`, "", "12", "x#"} {
		if got, want := m.contains(s, sub), strings.Contains(s, sub); got != want {
			t.Fatalf("contains(%q, %q) with markers = %v, want %v", s, sub, got, want)
		}
		if sub == "" {
			continue
		}
		for end := 0; end <= len(s); end++ {
			if got, want := m.lastIndex(s, end, sub), strings.LastIndex(s[:end], sub); got != want {
				t.Fatalf("lastIndex(%q[:%d], %q) with markers = %d, want %d", s, end, sub, got, want)
			}
		}
	}
}

// TestMarksAgree: extract_answer, extract_boxed and contains give the
// same answers through a text's markers as by searching it, on texts
// made of markers, braces, digits and their fragments.
func TestMarksAgree(t *testing.T) {
	parts := []string{`\boxed`, `\fbox`, `\box`, "####", "###", "#", `\`, "{", "}", " ", "\n", "12", "3,456", ".5", "x", "boxed"}
	r := rand.New(rand.NewPCG(7, 19))
	for range 20_000 {
		var b strings.Builder
		for n := r.IntN(12); n > 0; n-- {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		checkMarks(t, b.String())
	}
}

func FuzzParseNumber(f *testing.F) {
	for _, s := range []string{"$1,234.50", `\frac{1}{0}`, "1e400", "12 km", "-$-3", `\frac{\frac{1}{2}}{3}`, "1/", ","} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := ParseNumber(s)
		if ok && (math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Fatalf("ParseNumber(%q) = %v", s, v)
		}
		if !ok && v != 0 {
			t.Fatalf("ParseNumber(%q) = %v, false", s, v)
		}
		_ = NumEqual(s, s, 0)
		_ = RepetitionRatio(s, 2)
	})
}

// TestParsePlainAgrees: the fast path gives what the general parser
// gives, bit for bit, on every text it accepts.
func TestParsePlainAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const alphabet = "0123456789,.,.0123456789 e-"
	check := func(s string) {
		v, ok := parsePlain(s)
		if !ok {
			return
		}
		w, wok := parseNumber(s)
		if !wok || math.Float64bits(v) != math.Float64bits(w) {
			t.Fatalf("%q: fast path %v (%x), general %v, %v (%x)", s, v, math.Float64bits(v), w, wok, math.Float64bits(w))
		}
	}
	for _, s := range []string{"0", "00", "1,234", "1,234.5", "0.1", "0.3", "123456789012345", "999999999999999.9",
		"1.000000000000001", "4503599627370497", "12.", "1,23", "1,2345", "1.2.3", "1e5", ",123", "1,234,567.891"} {
		check(s)
	}
	accepted := 0
	for range 300_000 {
		b := make([]byte, 1+r.IntN(18))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		check(string(b))
		if _, ok := parsePlain(string(b)); ok {
			accepted++
		}
		// Random numbers written as answers are.
		v := r.Float64() * math.Pow(10, float64(r.IntN(16)))
		for _, s := range []string{strconv.FormatFloat(v, 'f', -1, 64), strconv.FormatFloat(v, 'f', r.IntN(8), 64), strconv.Itoa(r.IntN(1 << 40))} {
			check(s)
		}
	}
	if accepted < 1000 {
		t.Fatalf("the fast path took only %d random texts", accepted)
	}
}

package rewards

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

const twoComponents = "components:\n  - name: accuracy\n    expr: 'completion == answer ? 1.0 : 0.0'\n  - name: length\n    expr: 'size(completion) > 2 ? -1.0 : 0.0'\n"

// TestCorrectKey: the forms of the spec's `correct:` key and the rule
// each gives; without the key the default of the components.
func TestCorrectKey(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want tables.Correctness
	}{
		{name: "no key, no correct component", src: twoComponents, want: tables.Correctness{Above: true}},
		{name: "no key, a correct component", src: "components:\n  - name: correct\n    expr: '1.0'\n",
			want: tables.Correctness{Component: "correct", Threshold: 0.5}},
		{name: "a component name", src: twoComponents + "correct: accuracy\n",
			want: tables.Correctness{Component: "accuracy", Threshold: 0.5}},
		{name: "a component and at_least", src: twoComponents + "correct: {component: accuracy, at_least: 1}\n",
			want: tables.Correctness{Component: "accuracy", Threshold: 1}},
		{name: "the total above", src: "correct:\n  above: -0.5\n" + twoComponents,
			want: tables.Correctness{Threshold: -0.5, Above: true}},
		{name: "the total at least", src: twoComponents + "correct: {at_least: 1}\n",
			want: tables.Correctness{Threshold: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSpec("spec.yaml", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Correctness(); got != tc.want {
				t.Errorf("rule %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestBadCorrectKey: each bad `correct:` value fails with the file, line
// and column of the value and what to write instead.
func TestBadCorrectKey(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{name: "unknown component", src: twoComponents + "correct: answer_ok\n",
			want: `spec.yaml:6:10: correct: no component "answer_ok" (declared: accuracy, length)`},
		{name: "unknown component in a mapping", src: twoComponents + "correct:\n  component: acurracy\n",
			want: `spec.yaml:7:14: correct: no component "acurracy" (declared: accuracy, length)`},
		{name: "non-numeric threshold", src: twoComponents + "correct: {component: accuracy, at_least: high}\n",
			want: `spec.yaml:6:42: correct.at_least must be a finite number, found "high" (write a number such as 0.5 or 1)`},
		{name: "quoted threshold", src: twoComponents + "correct:\n  above: '0.5'\n",
			want: `spec.yaml:7:10: correct.above must be a finite number, found "'0.5'" (write a number such as 0.5 or 1)`},
		{name: "infinite threshold", src: twoComponents + "correct: {at_least: .inf}\n",
			want: `spec.yaml:6:21: correct.at_least must be a finite number, found ".inf" (write a number such as 0.5 or 1)`},
		{name: "both thresholds", src: twoComponents + "correct: {at_least: 1, above: 0}\n",
			want: `spec.yaml:6:31: correct: at_least and above both set (keep one of them)`},
		{name: "unknown key", src: twoComponents + "correct: {component: accuracy, threshold: 0.5}\n",
			want: `spec.yaml:6:32: correct: unknown key "threshold" (known keys: above, at_least, component)`},
		{name: "a list", src: twoComponents + "correct: [accuracy]\n",
			want: `spec.yaml:6:10: correct: expected a component name or a mapping, found a list (e.g. correct: {component: correct, at_least: 0.5})`},
		{name: "empty mapping", src: twoComponents + "correct: {}\n",
			want: `spec.yaml:6:10: correct is empty (e.g. correct: {component: correct, at_least: 0.5})`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpec("spec.yaml", []byte(tc.src))
			if err == nil {
				t.Fatal("parsed")
			}
			if !errors.Is(err, ErrSpec) {
				t.Errorf("%v is not an ErrSpec", err)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n  %v\nwant\n  %s", err, tc.want)
			}
		})
	}
}

// TestCorrectKeyDigestAndFile: the key enters the digest only when
// present (a spec without it keeps its digest), and the rewards file a
// compiled spec writes carries the declared rule.
func TestCorrectKeyDigestAndFile(t *testing.T) {
	plain, err := ParseSpec("spec.yaml", []byte(twoComponents))
	if err != nil {
		t.Fatal(err)
	}
	declared, err := ParseSpec("spec.yaml", []byte(twoComponents+"correct: accuracy\n"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := ParseSpec("spec.yaml", []byte(twoComponents+"correct: {component: accuracy, at_least: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	// A spec without the key hashes as before the key existed: pin_test.go
	// pins the digests of the shipped specs, none of which has it.
	if plain.Digest() == declared.Digest() || declared.Digest() == other.Digest() {
		t.Errorf("digests %s, %s, %s: want three different", plain.Digest(), declared.Digest(), other.Digest())
	}
	for _, tc := range []struct {
		spec *Spec
		want tables.Correctness
	}{{plain, tables.Correctness{Above: true}}, {declared, tables.Correctness{Component: "accuracy", Threshold: 0.5}}} {
		p, err := Compile(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "rewards.parquet")
		if err := tables.WriteFile(path, p.Table(), []tables.Reward{{PromptID: "p", Total: 0, Status: tables.StatusOK,
			Components: map[string]float64{"accuracy": 1, "length": -1}, SpecDigest: tc.spec.Digest()}}, nil); err != nil {
			t.Fatal(err)
		}
		rows, rule, err := tables.ReadRewardsFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if rule != tc.want || p.Correctness() != tc.want {
			t.Errorf("file's rule %+v, program's %+v, want %+v", rule, p.Correctness(), tc.want)
		}
		if got, want := rule.Correct(rows[0]), tc.want.Component != ""; got != want {
			t.Errorf("row correct %v, want %v", got, want)
		}
	}
}

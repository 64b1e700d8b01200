package arith_test

import (
	"hash/fnv"
	"reflect"
	"strconv"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments/arith"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// The rule, restated with the standard library's FNV-1a.
func heldOutByStdlib(a, b int) bool {
	h := fnv.New32a()
	h.Write([]byte(strconv.Itoa(a) + "+" + strconv.Itoa(b)))
	return h.Sum32()%10 == 0
}

func TestHeldOutRule(t *testing.T) {
	for _, c := range []struct {
		a, b int
		want bool
	}{
		{123, 456, false}, // FNV-1a-32("123+456") = 2889772695, mod 10 = 5
		{0, 13, true},
		{0, 19, true},
		{1, 5, true},
		{2, 0, false},
		{0, 0, false},
		{999, 999, false},
	} {
		if got := arith.HeldOut(c.a, c.b); got != c.want {
			t.Errorf("HeldOut(%d, %d) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
	n := 0
	for a := 0; a <= arith.MaxOperand; a++ {
		for b := 0; b <= arith.MaxOperand; b++ {
			got := arith.HeldOut(a, b)
			if got != heldOutByStdlib(a, b) {
				t.Fatalf("HeldOut(%d, %d) = %v disagrees with hash/fnv", a, b, got)
			}
			if got {
				n++
			}
		}
	}
	if n != 100005 || arith.NumHeldOut() != n {
		t.Fatalf("%d held-out problems (NumHeldOut %d), want 100005", n, arith.NumHeldOut())
	}
}

// The splits never overlap over the whole problem space.
func TestSplitsDisjoint(t *testing.T) {
	all := arith.HeldOutSet(1 << 30)
	if len(all) != 100005 {
		t.Fatalf("HeldOutSet has %d problems, want 100005", len(all))
	}
	inSet := make(map[arith.Problem]bool, len(all))
	for _, p := range all {
		if !p.HeldOut() || p.Split() != arith.SplitHeldOut {
			t.Fatalf("%v in the held-out set is not held out", p)
		}
		if inSet[p] {
			t.Fatalf("%v twice in the held-out set", p)
		}
		inSet[p] = true
	}
	for a := 0; a <= arith.MaxOperand; a++ {
		for b := 0; b <= arith.MaxOperand; b++ {
			p := arith.Problem{A: a, B: b}
			if inSet[p] != p.HeldOut() {
				t.Fatalf("%v: in held-out set %v, HeldOut %v", p, inSet[p], p.HeldOut())
			}
		}
	}
	for seed := int64(0); seed < 4; seed++ {
		s := arith.NewSampler(seed)
		for range 50000 {
			if p := s.Next(); inSet[p] || p.Split() != arith.SplitTrain || p.A > arith.MaxOperand || p.B > arith.MaxOperand || p.A < 0 || p.B < 0 {
				t.Fatalf("seed %d sampled %v (held out %v)", seed, p, inSet[p])
			}
		}
	}
}

// Fixed seeds give fixed problems, in any Go version.
func TestStable(t *testing.T) {
	for _, c := range []struct {
		name string
		got  []arith.Problem
		want []arith.Problem
	}{
		{"HeldOutSet(5)", arith.HeldOutSet(5), []arith.Problem{{72, 953}, {287, 935}, {518, 123}, {855, 413}, {826, 57}}},
		{"Train(1, 5)", arith.Train(1, 5), []arith.Problem{{465, 519}, {590, 235}, {761, 48}, {45, 533}, {520, 950}}},
		{"HeldOutSet(0)", arith.HeldOutSet(0), []arith.Problem{}},
		{"HeldOutSet(-1)", arith.HeldOutSet(-1), []arith.Problem{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Fatalf("got %v, want %v", c.got, c.want)
			}
		})
	}
	// A smaller evaluation set is a prefix of a larger one.
	if a, b := arith.HeldOutSet(100), arith.HeldOutSet(1000); !reflect.DeepEqual(a, b[:100]) {
		t.Fatal("HeldOutSet(100) is not a prefix of HeldOutSet(1000)")
	}
	if a, b := arith.Train(9, 10), arith.Train(9, 20); !reflect.DeepEqual(a, b[:10]) {
		t.Fatal("Train(9, 10) is not a prefix of Train(9, 20)")
	}
}

func TestRow(t *testing.T) {
	got := arith.Problem{A: 123, B: 456}.Row()
	want := tables.Prompt{PromptID: "arith-123+456", Prompt: "123+456=", Answer: "579",
		Metadata: `{"a":123,"b":456}`, Source: "arith", Split: "train"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Row() = %+v, want %+v", got, want)
	}
	if got := (arith.Problem{A: 1, B: 5}).Row().Split; got != "test" {
		t.Fatalf("1+5 split %q, want test", got)
	}
}

func TestParseID(t *testing.T) {
	for _, c := range []struct {
		id      string
		want    arith.Problem
		wantErr bool
	}{
		{"arith-123+456", arith.Problem{A: 123, B: 456}, false},
		{"arith-0+999", arith.Problem{A: 0, B: 999}, false},
		{"arith-1000+1", arith.Problem{}, true},
		{"arith-01+1", arith.Problem{}, true},
		{"arith--1+1", arith.Problem{}, true},
		{"arith-1+", arith.Problem{}, true},
		{"arith-1-1", arith.Problem{}, true},
		{"123+456", arith.Problem{}, true},
	} {
		t.Run(c.id, func(t *testing.T) {
			got, err := arith.ParseID(c.id)
			if (err != nil) != c.wantErr || got != c.want {
				t.Fatalf("ParseID(%q) = %v, %v; want %v, error %v", c.id, got, err, c.want, c.wantErr)
			}
		})
	}
}

func FuzzParseID(f *testing.F) {
	f.Add("arith-123+456")
	f.Add("arith-0+0")
	f.Add("arith-+")
	f.Fuzz(func(t *testing.T, id string) {
		p, err := arith.ParseID(id)
		if err != nil {
			return
		}
		if p.ID() != id {
			t.Fatalf("ParseID(%q) = %v, whose ID is %q", id, p, p.ID())
		}
	})
}

// The embedded model's pretraining excludes its own held-out rule; it
// must be this one, or the model has seen problems evaluated as unseen.
func TestHeldOutAgreesWithEmbeddedModel(t *testing.T) {
	for a := 0; a <= arith.MaxOperand; a++ {
		for b := 0; b <= arith.MaxOperand; b++ {
			if arith.HeldOut(a, b) != tiny.HeldOut(a, b) {
				t.Fatalf("HeldOut(%d, %d): environments/arith says %v, policy/tiny says %v", a, b, arith.HeldOut(a, b), tiny.HeldOut(a, b))
			}
		}
	}
}

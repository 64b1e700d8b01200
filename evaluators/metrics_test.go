package evaluators

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// bruteForce enumerates every k-subset of n samples (the first c correct)
// and returns the fraction with at least one correct (pass@k) and with all
// correct (pass^k): the definitions the estimators must equal.
func bruteForce(n, c, k int) (pass, hat float64) {
	subset := make([]int, k)
	total := 0
	forSubsets(n, k, subset, func() {
		total++
		right := 0
		for _, i := range subset {
			if i < c {
				right++
			}
		}
		if right > 0 {
			pass++
		}
		if right == k {
			hat++
		}
	})
	return pass / float64(total), hat / float64(total)
}

func TestPassAtKAgainstEnumeration(t *testing.T) {
	for n := 1; n <= 10; n++ {
		for c := 0; c <= n; c++ {
			for k := 1; k <= n; k++ {
				wantPass, wantHat := bruteForce(n, c, k)
				pass, err := PassAtK(n, c, k)
				if err != nil {
					t.Fatal(err)
				}
				hat, err := PassHatK(n, c, k)
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(pass-wantPass) > 1e-12 || math.Abs(hat-wantHat) > 1e-12 {
					t.Fatalf("n=%d c=%d k=%d: pass@k %v (enumeration %v), pass^k %v (enumeration %v)", n, c, k, pass, wantPass, hat, wantHat)
				}
			}
		}
	}
}

func TestPassAtKExact(t *testing.T) {
	// n=16, c=4, k=4: 1 − C(12,4)/C(16,4) = 1 − 495/1820.
	got, _ := PassAtK(16, 4, 4)
	if want := 1 - 495.0/1820; math.Abs(got-want) > 1e-15 {
		t.Errorf("pass@4 = %v, want %v", got, want)
	}
	// pass@1 is c/n exactly; large n stays finite where binomials overflow.
	if got, _ := PassAtK(16, 5, 1); got != 5.0/16 {
		t.Errorf("pass@1 = %v, want 5/16", got)
	}
	if got, _ := PassAtK(2000, 3, 1000); math.IsNaN(got) || got < 0.87 || got > 0.88 {
		t.Errorf("pass@1000 of 3/2000 = %v, want 1 − (1000·999·998)/(2000·1999·1998) ≈ 0.875", got)
	}
}

func TestKGreaterThanN(t *testing.T) {
	for _, f := range []func(int, int, int) (float64, error){PassAtK, PassHatK} {
		_, err := f(4, 1, 8)
		if !errors.Is(err, ErrKTooLarge) || err.Error() != "k=8 but only n=4 samples per problem: k exceeds the samples per problem (sample at least k, ideally 2k)" {
			t.Errorf("k > n: %v", err)
		}
	}
	if _, err := MajAtK([]string{"1", "2"}, []bool{true, false}, 3); !errors.Is(err, ErrKTooLarge) {
		t.Errorf("maj@k k > n: %v", err)
	}
	if _, err := PassAtK(4, 5, 1); err == nil {
		t.Error("c > n accepted")
	}
	if _, err := PassAtK(4, 1, 0); err == nil {
		t.Error("k = 0 accepted")
	}
}

// majBrute is maj@k by the definition, written independently: for each
// k-subset, count votes in a map, find the top answers, credit the right
// ones' share.
func majBrute(answers []string, correct []bool, k int) float64 {
	right := map[string]bool{}
	for i, a := range answers {
		if correct[i] {
			right[a] = true
		}
	}
	subset := make([]int, k)
	sum, total := 0.0, 0
	forSubsets(len(answers), k, subset, func() {
		total++
		votes := map[string]int{}
		for _, i := range subset {
			if answers[i] != "" {
				votes[answers[i]]++
			}
		}
		top := 0
		for _, v := range votes {
			top = max(top, v)
		}
		ties, good := 0, 0
		for a, v := range votes {
			if v == top && top > 0 {
				ties++
				if right[a] {
					good++
				}
			}
		}
		if ties > 0 {
			sum += float64(good) / float64(ties)
		}
	})
	return sum / float64(total)
}

func TestMajAtKAgainstEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 300; trial++ {
		n := 1 + rng.IntN(9)
		answers := make([]string, n)
		correct := make([]bool, n)
		for i := range answers {
			v := rng.IntN(4) // "" (no answer), "0", "1", "2"; "1" is right
			if v > 0 {
				answers[i] = strconv.Itoa(v - 1)
			}
			correct[i] = answers[i] == "1"
		}
		k := 1 + rng.IntN(n)
		got, err := MajAtK(answers, correct, k)
		if err != nil {
			t.Fatal(err)
		}
		if want := majBrute(answers, correct, k); math.Abs(got-want) > 1e-12 {
			t.Fatalf("answers %q k=%d: maj@k %v, enumeration %v", answers, k, got, want)
		}
	}
}

func TestMajAtKLargeCases(t *testing.T) {
	// 24 samples, 3 answers: exact over 91 count vectors, though there are
	// 2.7M subsets; by symmetry each answer wins a third of the votes.
	answers := make([]string, 24)
	correct := make([]bool, 24)
	for i := range answers {
		answers[i] = strconv.Itoa(i % 3)
		correct[i] = i%3 == 0
	}
	if got, _ := MajAtK(answers, correct, 12); math.Abs(got-1.0/3) > 1e-12 {
		t.Errorf("maj@12 of three equal answers = %v, want 1/3", got)
	}
	// 40 distinct answers, k = 20: too many count vectors, so sampled with
	// a fixed seed — the same value every time, near the exact 1/40 ties.
	answers, correct = make([]string, 40), make([]bool, 40)
	for i := range answers {
		answers[i] = "a" + strconv.Itoa(i)
	}
	correct[0] = true
	a, _ := MajAtK(answers, correct, 20)
	b, _ := MajAtK(answers, correct, 20)
	if a != b || math.Abs(a-1.0/40) > 0.01 {
		t.Errorf("maj@20 of 40 distinct answers = %v then %v, want ≈ 1/40", a, b)
	}
}

func TestWilson(t *testing.T) {
	lo, hi := Wilson(5, 10)
	if math.Abs(lo-0.2366) > 1e-4 || math.Abs(hi-0.7634) > 1e-4 {
		t.Errorf("Wilson(5, 10) = [%v, %v], want [0.2366, 0.7634]", lo, hi)
	}
	if lo, hi := Wilson(0, 0); lo != 0 || hi != 0 {
		t.Errorf("no trials: [%v, %v]", lo, hi)
	}
}

func TestBootstrapDeterministicAndCoversMean(t *testing.T) {
	v := make([]float64, 200)
	rng := rand.New(rand.NewPCG(1, 1))
	mean := 0.0
	for i := range v {
		v[i] = rng.Float64()
		mean += v[i]
	}
	mean /= float64(len(v))
	lo, hi := Bootstrap(v, 0)
	lo2, hi2 := Bootstrap(v, 0)
	if lo != lo2 || hi != hi2 || lo >= mean || hi <= mean || hi-lo > 0.2 {
		t.Errorf("bootstrap [%v, %v] then [%v, %v] around %v", lo, hi, lo2, hi2, mean)
	}
}

// Large sets use the normal interval; it agrees with the bootstrap just
// below the switch.
func TestBootstrapNormalLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	v := make([]float64, normalLimit)
	for i := range v {
		if rng.Float64() < 0.3 {
			v[i] = 1
		}
	}
	nlo, nhi := Bootstrap(v, 0)
	blo, bhi := Bootstrap(v[:normalLimit-1], 0)
	if math.Abs(nlo-blo) > 0.003 || math.Abs(nhi-bhi) > 0.003 {
		t.Errorf("normal [%v, %v] vs bootstrap [%v, %v]", nlo, nhi, blo, bhi)
	}
}

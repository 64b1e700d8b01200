package tiny

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"slices"
	"testing"
)

// The shipped weights, pinned. Regenerate with
// RLPIPE_SLOW=1 go test -run TestPretrainReproducesEmbedded and update.
const (
	embeddedSHA256 = "94322e33363d2980c431ef34ad1d0f6aac1073c1816dee3fe230e12ea1f6843b"
	// Greedy accuracy and exact expected pass@1 on HeldOutProblems(300).
	embeddedGreedyRight = 112
	embeddedPass1       = 0.31639807637808898
)

// The shipped tiny-chain base: its checksum, version and held-out figures
// on single problems, pinned as tiny-arith's are.
const (
	chainSHA256      = "20acd5e41c9404cd8e62b2ef2701107343ff84e89b27fefd9dd06cac6c835cd3"
	chainGreedyRight = 186
	chainPass1       = 0.47648578069286351
)

// TestEmbedded pins each shipped base: its file's checksum, its config
// and version, and its greedy accuracy and exact expected pass@1 on
// HeldOutProblems(300).
func TestEmbedded(t *testing.T) {
	for _, c := range []struct {
		load   func() (*Model, error)
		sha256 func() string
		want   string
		cfg    Config
		right  int
		pass1  float64
	}{
		{Embedded, EmbeddedSHA256, embeddedSHA256, DefaultConfig(), embeddedGreedyRight, embeddedPass1},
		{EmbeddedChain, EmbeddedChainSHA256, chainSHA256, DefaultChainPretrainConfig().Model, chainGreedyRight, chainPass1},
	} {
		t.Run(c.cfg.Name, func(t *testing.T) {
			m := shippedBase(t, c.load, c.sha256, c.want, c.cfg)
			checkHeldOut(t, m.GreedyAccuracy, m.ExpectedPass1, HeldOutProblems(300), c.right, c.pass1)
		})
	}
}

// shippedBase loads a shipped base with load and checks that it is the
// one pinned: its file's checksum (sum) is want, its config cfg and its
// version cfg.Name@ the checksum's first 12 digits.
func shippedBase(t *testing.T, load func() (*Model, error), sum func() string, want string, cfg Config) *Model {
	t.Helper()
	if got := sum(); got != want {
		t.Fatalf("the shipped %s weights have sha256 %s, want %s", cfg.Name, got, want)
	}
	m, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config() != cfg {
		t.Errorf("config %+v, want %+v", m.Config(), cfg)
	}
	if v := m.Version(); v != cfg.Name+"@"+want[:12] {
		t.Errorf("version %s", v)
	}
	return m
}

// checkHeldOut checks a base's pinned figures on 300 held-out problems
// (probs): right of them answered greedily, and the exact expected
// pass@1, pass1, to the last bit. greedy and expected are the base's
// measures of its task (GreedyAccuracy and ExpectedPass1, or
// RGGreedyAccuracy and RGExpectedPass1).
func checkHeldOut[P any](t *testing.T, greedy, expected func(context.Context, *Adapter, []P) (float64, error), probs []P, right int, pass1 float64) {
	t.Helper()
	ctx := context.Background()
	acc, err := greedy(ctx, nil, probs)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := expected(ctx, nil, probs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("held-out greedy accuracy %.4f (%d/300), exact expected pass@1 %.6f", acc, int(acc*300+0.5), p1)
	if got := int(acc*300 + 0.5); got != right || p1 != pass1 {
		t.Errorf("greedy %d of 300, expected pass@1 %.17g; want %d and %.17g", got, p1, right, pass1)
	}
}

// ChainExample is the second turn of a running sum as the tokens of an
// episode of environments/arith's chain: the first answer, its EOS, the
// restated problem; the completion the new sum and EOS.
func TestChainExample(t *testing.T) {
	m, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	ex, err := m.ChainExample(Problem{12, 3}, 4)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := m.Tokenize("12+3=15")
	rest, _ := m.Tokenize("15+4=")
	want = append(append(want, EOS), rest...)
	ans, _ := m.Tokenize("19")
	if !slices.Equal(ex.Prompt, want) || !slices.Equal(ex.Completion, append(ans, EOS)) {
		t.Errorf("example %+v", ex)
	}
}

// TestPretrainReproducesEmbedded runs the full default pretraining (about
// a minute on two cores, ten times that under -race) and compares its output with
// the shipped file. It runs when RLPIPE_SLOW=1.
func TestPretrainReproducesEmbedded(t *testing.T) {
	if os.Getenv("RLPIPE_SLOW") == "" || testing.Short() {
		t.Skip("set RLPIPE_SLOW=1 to run the full pretraining")
	}
	for _, c := range []struct {
		cfg  PretrainConfig
		want string
	}{{DefaultPretrainConfig(), embeddedSHA256}, {DefaultChainPretrainConfig(), chainSHA256}} {
		m, err := Pretrain(context.Background(), c.cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		if got := hex.EncodeToString(s[:]); got != c.want {
			if out := os.Getenv("RLPIPE_WRITE_WEIGHTS"); out != "" {
				os.WriteFile(out+"."+c.cfg.Model.Name, b, 0o644)
			}
			t.Errorf("pretraining %s gives sha256 %s, the shipped file is %s", c.cfg.Model.Name, got, c.want)
		}
	}
}

// TestPretrainDeterministic: a short pretraining of a small model gives the
// same bytes with one worker or two.
func TestPretrainDeterministic(t *testing.T) {
	cfg := DefaultPretrainConfig()
	cfg.Model = smallConfig()
	cfg.Steps, cfg.BatchSize = 3, 8
	var sums [2]string
	for i, w := range []int{1, 2} {
		cfg.Workers = w
		m, err := Pretrain(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		sums[i] = m.Version()
	}
	if sums[0] != sums[1] {
		t.Errorf("1 worker gives %s, 2 give %s", sums[0], sums[1])
	}
}

func TestHeldOut(t *testing.T) {
	n := 0
	for a := 0; a < 1000; a += 3 {
		for b := 0; b < 1000; b += 7 {
			if HeldOut(a, b) {
				n++
			}
		}
	}
	// 334 × 143 problems sampled; about a tenth held out.
	if n != 4788 {
		t.Errorf("%d held out", n)
	}
	probs := HeldOutProblems(300)
	seen := map[Problem]bool{}
	for _, p := range probs {
		if !HeldOut(p.A, p.B) || seen[p] || p.A < 0 || p.A > 999 || p.B < 0 || p.B > 999 {
			t.Fatalf("bad held-out problem %+v", p)
		}
		seen[p] = true
	}
	if probs[0] != HeldOutProblems(1)[0] {
		t.Error("HeldOutProblems is not a fixed sequence")
	}
	t.Logf("first held-out problems: %v", probs[:5])
}

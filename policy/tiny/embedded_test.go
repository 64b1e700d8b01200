package tiny

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"
)

// The shipped weights, pinned. Regenerate with
// RLPIPE_SLOW=1 go test -run TestPretrainReproducesEmbedded and update.
const (
	embeddedSHA256 = "ff1783929c5d20914a17a0569c2a4d48bec0b1154c9be599c5e16d04f6493167"
	// Greedy accuracy and exact expected pass@1 on HeldOutProblems(300).
	embeddedGreedyRight = 154
	embeddedPass1       = 0.44604182548634108
)

func TestEmbedded(t *testing.T) {
	if got := EmbeddedSHA256(); got != embeddedSHA256 {
		t.Fatalf("weights/base.safetensors has sha256 %s, want %s", got, embeddedSHA256)
	}
	m, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config() != DefaultConfig() {
		t.Errorf("config %+v", m.Config())
	}
	if v := m.Version(); v != "tiny-arith@"+embeddedSHA256[:12] {
		t.Errorf("version %s", v)
	}
	ctx := context.Background()
	probs := HeldOutProblems(300)
	acc, err := m.GreedyAccuracy(ctx, nil, probs)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := m.ExpectedPass1(ctx, nil, probs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("held-out greedy accuracy %.4f (%d/300), exact expected pass@1 %.6f", acc, int(acc*300+0.5), p1)
	if right := int(acc*300 + 0.5); right != embeddedGreedyRight {
		t.Errorf("greedy: %d of 300 right, want %d", right, embeddedGreedyRight)
	}
	if p1 != embeddedPass1 {
		t.Errorf("expected pass@1 %.17g, want %.17g", p1, embeddedPass1)
	}
}

// TestPretrainReproducesEmbedded runs the full default pretraining (about
// a minute on two cores, ten times that under -race) and compares its output with
// the shipped file. It runs when RLPIPE_SLOW=1.
func TestPretrainReproducesEmbedded(t *testing.T) {
	if os.Getenv("RLPIPE_SLOW") == "" || testing.Short() {
		t.Skip("set RLPIPE_SLOW=1 to run the full pretraining")
	}
	m, err := Pretrain(context.Background(), DefaultPretrainConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	if got := hex.EncodeToString(s[:]); got != embeddedSHA256 {
		if out := os.Getenv("RLPIPE_WRITE_WEIGHTS"); out != "" {
			os.WriteFile(out, b, 0o644)
		}
		t.Fatalf("pretraining gives sha256 %s, the shipped file is %s", got, embeddedSHA256)
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

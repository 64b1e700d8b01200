package advantages_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
)

// TestGAEPeerParity computes GAE and the whitening on a random batch
// with rlpipe (GAE per row, then Whiten over the batch) and with verl's
// core_algos.compute_gae_advantage_return (testdata/peer_gae.py), and
// wants every trainable token's advantage and return equal within 1e-6,
// for γ = λ = 1 (verl's defaults) and γ 0.99, λ 0.95. The batch: 30 rows
// of 1 to 16 tokens, values around 0.5, a reward on the last trainable
// token and small rewards elsewhere (a KL in the reward), observation
// tokens (not trainable) inside every third row, and some rows whose
// last tokens are observations. It skips, saying why, when verl does not
// import.
func TestGAEPeerParity(t *testing.T) {
	py := pyvenv.Peer(t)
	rng := rand.New(rand.NewPCG(36, 7))
	type row struct {
		Rewards []float64 `json:"rewards"`
		Values  []float64 `json:"values"`
		Mask    []float64 `json:"mask"`
	}
	rows := make([]row, 30)
	masks := make([][]bool, len(rows))
	for i := range rows {
		n := 1 + rng.IntN(16)
		r := row{Rewards: make([]float64, n), Values: make([]float64, n), Mask: make([]float64, n)}
		m := make([]bool, n)
		last := -1
		for t := range n {
			m[t] = i%3 != 2 || t == 0 || rng.IntN(3) > 0
			r.Values[t] = 0.5 + rng.NormFloat64()*0.3
			if m[t] {
				r.Mask[t] = 1
				r.Rewards[t] = -0.01 * rng.ExpFloat64()
				last = t
			}
		}
		r.Rewards[last] += float64(rng.IntN(2))
		rows[i], masks[i] = r, m
	}
	for _, gl := range [][2]float64{{1, 1}, {0.99, 0.95}} {
		dir := t.TempDir()
		b, err := json.Marshal(map[string]any{"rows": rows, "gamma": gl[0], "lambda": gl[1]})
		if err != nil {
			t.Fatal(err)
		}
		batch := filepath.Join(dir, "batch.json")
		if err := os.WriteFile(batch, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out := pyvenv.Run(t, "testdata/peer_gae.py", nil, py, filepath.Join("testdata", "peer_gae.py"), batch)
		var peer struct {
			Error      string      `json:"verl_error"`
			Advantages [][]float64 `json:"advantages"`
			Returns    [][]float64 `json:"returns"`
		}
		if err := json.Unmarshal(out, &peer); err != nil {
			t.Fatalf("read verl's GAE: %v\n%s", err, out)
		}
		if peer.Error != "" {
			t.Skipf("verl does not import under %s: %s", py, peer.Error)
		}
		adv, ret := make([][]float64, len(rows)), make([][]float64, len(rows))
		for i, r := range rows {
			adv[i], ret[i] = advantages.GAE(r.Rewards, r.Values, masks[i], gl[0], gl[1])
		}
		advantages.Whiten(adv, masks)
		compared := 0
		for i := range rows {
			for tok, ok := range masks[i] {
				if !ok {
					continue
				}
				compared++
				if math.Abs(adv[i][tok]-peer.Advantages[i][tok]) > 1e-6 || math.Abs(ret[i][tok]-peer.Returns[i][tok]) > 1e-6 {
					t.Errorf("γ %g λ %g, row %d token %d: rlpipe advantage %v return %v, verl %v and %v",
						gl[0], gl[1], i, tok, adv[i][tok], ret[i][tok], peer.Advantages[i][tok], peer.Returns[i][tok])
				}
			}
		}
		t.Logf("γ %g λ %g: %d trainable tokens of %d rows agree with verl within 1e-6", gl[0], gl[1], compared, len(rows))
	}
}

package advantages_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
)

// peerBatch is a random batch with a fixed seed: 40 groups of 2 to 8
// rewards drawn mostly from a few values (ties), some continuous and
// negative, and one group whose rewards are all equal (std 0).
func peerBatch() [][]float64 {
	rng := rand.New(rand.NewPCG(36, 2026))
	levels := []float64{0, 0.25, 0.5, 1, -1}
	groups := make([][]float64, 40)
	for i := range groups {
		g := make([]float64, 2+rng.IntN(7))
		for j := range g {
			if rng.IntN(4) == 0 {
				g[j] = rng.NormFloat64() * 3
			} else {
				g[j] = levels[rng.IntN(len(levels))]
			}
		}
		groups[i] = g
	}
	groups[7] = []float64{0.5, 0.5, 0.5, 0.5, 0.5, 0.5}
	return groups
}

// TestPeerParity computes the advantages of a random batch with rlpipe's
// estimators and with the peers' own code (testdata/peer_advantages.py:
// verl's core_algos functions, TRL's nanstd and its GRPO advantage
// lines), and wants them equal within 1e-6 per sample. Each peer's cases
// skip, saying why, when its package does not import. Lone samples are
// left out of the batch: rlpipe masks them, verl gives them r/(1+ε).
func TestPeerParity(t *testing.T) {
	py := pyvenv.Peer(t)
	groups := peerBatch()
	batch := filepath.Join(t.TempDir(), "batch.json")
	b, err := json.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(batch, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"} {
		t.Setenv(v, "1") // importing TRL must not reach the network
	}
	out := pyvenv.Run(t, "testdata/peer_advantages.py", nil, py, filepath.Join("testdata", "peer_advantages.py"), batch)
	var peer map[string]any
	if err := json.Unmarshal(out, &peer); err != nil {
		t.Fatalf("read the peers' advantages: %v\n%s", err, out)
	}
	if how, ok := peer["verl_import"].(string); ok {
		t.Logf("verl imported as: %s", how)
	}

	var rows []tables.Reward
	for i, g := range groups {
		for j, r := range g {
			rows = append(rows, tables.Reward{PromptID: fmt.Sprintf("p%03d", i), SampleIndex: int32(j), Total: r, Status: tables.StatusOK})
		}
	}
	for _, tc := range []struct {
		name, peer, pkg string
		o               advantages.Options
		// differ: a control, the peer's numbers are not these.
		differ bool
	}{
		{name: "grpo sample std vs verl compute_grpo_outcome_advantage", peer: "verl_grpo", pkg: "verl", o: advantages.Options{SampleStd: true}},
		{name: "dr_grpo vs verl compute_grpo_outcome_advantage without std", peer: "verl_grpo_no_std", pkg: "verl", o: advantages.Options{Estimator: advantages.DrGRPO}},
		{name: "grpo no_std vs verl compute_grpo_outcome_advantage without std", peer: "verl_grpo_no_std", pkg: "verl", o: advantages.Options{NoStd: true}},
		{name: "rloo vs verl compute_rloo_outcome_advantage", peer: "verl_rloo", pkg: "verl", o: advantages.Options{Estimator: advantages.RLOO}},
		{name: "reinforce_plus_plus_baseline vs verl compute_reinforce_plus_plus_baseline_outcome_advantage", peer: "verl_rpp_baseline", pkg: "verl",
			o: advantages.Options{Estimator: advantages.ReinforcePPBaseline}},
		{name: "control: population std is not verl's", peer: "verl_grpo", pkg: "verl", o: advantages.Options{}, differ: true},
		{name: "grpo sample std vs trl scale_rewards group", peer: "trl_grpo", pkg: "trl", o: advantages.Options{SampleStd: true, Epsilon: 1e-4}},
		{name: "dr_grpo vs trl scale_rewards none", peer: "trl_grpo_none", pkg: "trl", o: advantages.Options{Estimator: advantages.DrGRPO}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if why, ok := peer[tc.pkg+"_error"]; ok {
				t.Skipf("%s does not import under %s: %v", tc.pkg, py, why)
			}
			raw, ok := peer[tc.peer].([]any)
			if !ok || len(raw) != len(rows) {
				t.Fatalf("peer case %s: %d values, want %d", tc.peer, len(raw), len(rows))
			}
			adv, _ := advantages.Compute(rows, tc.o)
			if tc.differ {
				far := 0
				for i, a := range adv {
					if want, _ := raw[i].(float64); math.Abs(a.Advantage-want) > 1e-3 {
						far++
					}
				}
				if far == 0 {
					t.Errorf("%s agrees with rlpipe's options %+v everywhere: the comparison cannot tell them apart", tc.peer, tc.o)
				}
				return
			}
			for i, a := range adv {
				want, _ := raw[i].(float64)
				if a.Mask || math.Abs(a.Advantage-want) > 1e-6 {
					t.Errorf("%s/%d (rewards %v): rlpipe %v (mask %t), %s %v", a.PromptID, a.SampleIndex, groups[i2g(groups, i)], a.Advantage, a.Mask, tc.peer, want)
				}
			}
		})
	}
}

// i2g is the group of the i-th reward of the concatenated groups.
func i2g(groups [][]float64, i int) int {
	for g, rs := range groups {
		if i < len(rs) {
			return g
		}
		i -= len(rs)
	}
	return -1
}

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

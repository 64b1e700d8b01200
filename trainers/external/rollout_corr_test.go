package external_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// The reference script checks verl's rollout correction keys as the
// embedded trainer does, with the same messages (trainers/grpo's
// RolloutCorrection.Check), and fills in the same default thresholds.
func TestReferenceScriptRolloutCorrectionConfig(t *testing.T) {
	cases := []grpo.RolloutCorrection{
		{IS: "token"},
		{IS: "sequence", ISThreshold: 3, RS: "seq_mean_k1", RSThreshold: 1.5},
		{RS: "token_k1", RSThreshold: 2, RSThresholdLower: 0.4},
		{IS: "tokens"},
		{IS: "token", ISThreshold: -1},
		{ISThreshold: 3},
		{RS: "geometric", RSThreshold: 2},
		{RS: "token_k3"},
		{RS: "token_k3", RSThreshold: -0.5},
		{RSThreshold: 2},
		{RSThresholdLower: 0.5},
		{RS: "token_k3", RSThreshold: 0.1, RSThresholdLower: 0.05},
		{RS: "seq_mean_k1", RSThreshold: 1.5, RSThresholdLower: 2},
	}
	type pyCase struct {
		HP   map[string]any `json:"hp"`
		Want string         `json:"want"`
		// Thresholds are the filled-in ones when the options are valid.
		Thresholds []float64 `json:"thresholds"`
	}
	var in []pyCase
	for _, c := range cases {
		hp := map[string]any{"rollout_is": nil, "rollout_rs": nil, "rollout_is_threshold": c.ISThreshold,
			"rollout_rs_threshold": c.RSThreshold, "rollout_rs_threshold_lower": c.RSThresholdLower}
		if c.IS != "" {
			hp["rollout_is"] = c.IS
		}
		if c.RS != "" {
			hp["rollout_rs"] = c.RS
		}
		pc := pyCase{HP: hp}
		c.EnsureDefaults()
		if e := c.Check(); e != nil {
			pc.Want = "hyperparameters." + e.Key + ": " + e.Msg
		} else {
			pc.Thresholds = []float64{c.ISThreshold, c.RSThreshold, c.RSThresholdLower}
		}
		in = append(in, pc)
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	checkGRPOTrain(t, "rollout correction config", `
import json
from grpo_train import check_rollout_correction, ConfigError
for c in json.loads(r`+"'''"+string(b)+"'''"+`):
    hp = dict(c["hp"])
    try:
        check_rollout_correction(hp)
    except ConfigError as e:
        assert str(e) == c["want"], (str(e), c["want"])
        continue
    assert not c["want"], ("accepted", c)
    got = [hp["rollout_is_threshold"], hp["rollout_rs_threshold"], hp["rollout_rs_threshold_lower"]]
    assert got == c["thresholds"], (got, c)
`)
}

// The reference script's rollout correction of each sequence (its IS
// weights, the tokens its rejection keeps, and its figures) is verl's:
// on a random batch, for each IS level and every rejection statistic,
// the script's rollout_correction and rollout_figures against
// rollout_corr_helper.compute_rollout_correction_and_rejection_mask,
// weights within 1e-9, masks equal, figures within 1e-6. It runs under
// the peer Python (trainers/grpo's parity tests) and skips where verl
// does not import.
func TestReferenceScriptRolloutCorrectionPeer(t *testing.T) {
	py := pyvenv.Peer(t)
	helper, err := filepath.Abs(filepath.Join("..", "grpo", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	code := `
import json, math, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
try:
    import torch
    from peer_rollout_corr import import_rollout_corr
    _, helper, _ = import_rollout_corr()
except Exception as e:
    print(json.dumps({"skip": f"{type(e).__name__}: {e}"}))
    sys.exit(0)
from grpo_train import rollout_correction, rollout_figures, check_rollout_correction

g = torch.Generator().manual_seed(36)
B, T = 24, 12
lengths = torch.randint(1, T + 1, (B,), generator=g)
mask = torch.zeros(B, T, dtype=torch.float64)
for i, n in enumerate(lengths):
    mask[i, :n] = 1
mask[3, 1] = 0  # a hole
mask[7] = 0     # a sequence with no trainable token
drift = torch.randn(B, 1, generator=g, dtype=torch.float64) * 0.2
lw = (drift + torch.randn(B, T, generator=g, dtype=torch.float64) * 0.45) * mask
old = -1 - torch.rand(B, T, generator=g, dtype=torch.float64)
rollout = old - lw

cases = [("token", 2.0, None, None), ("sequence", 1.5, None, None), ("token", 1.5, "token_k1", "0.6_1.8")]
cases += [(None, 2.0, rs, th) for rs, th in (
    ("token_k1", "0.5_2"), ("token_k2", 0.2), ("token_k3", 0.2), ("seq_sum_k1", "0.4_3"), ("seq_sum_k2", 0.8),
    ("seq_sum_k3", 0.8), ("seq_mean_k1", "0.8_1.3"), ("seq_mean_k2", 0.1), ("seq_mean_k3", 0.1),
    ("seq_max_k2", 0.3), ("seq_max_k3", 0.3))]
for is_, c, rs, th in cases:
    name = f"{is_} {c} {rs} {th}"
    w, kept, metrics = helper.compute_rollout_correction_and_rejection_mask(
        old_log_prob=old, rollout_log_prob=rollout, response_mask=mask, rollout_is=is_,
        rollout_is_threshold=c, rollout_rs=rs, rollout_rs_threshold=th)
    hp = {"rollout_is": is_, "rollout_is_threshold": c if is_ else 0.0, "rollout_rs": rs, "rollout_rs_threshold": 0.0,
          "rollout_rs_threshold_lower": 0.0}
    if rs:
        lo, _, up = str(th).rpartition("_")
        hp["rollout_rs_threshold"] = float(up)
        if lo:
            hp["rollout_rs_threshold_lower"] = float(lo)
    check_rollout_correction(hp)
    sums = dict(tokens=0.0, seqs=0.0, wsum=0.0, capped=0.0, masked=0.0, seqs_masked=0.0)
    wmax = 0.0
    dropped = 0
    for i in range(B):
        ws, keep, f = rollout_correction(hp, lw[i], mask[i])
        for k in sums:
            sums[k] += f[k]
        wmax = max(wmax, f["wmax"])
        assert keep.tolist() == kept[i].tolist(), (name, i, keep.tolist(), kept[i].tolist())
        dropped += int(mask[i].sum() - keep.sum())
        if is_:
            want = w.batch["rollout_is_weights"][i]
            ws = torch.zeros_like(want) if ws is None else ws  # a sequence without trainable tokens
            assert float((ws - want).abs().max()) < 1e-9, (name, i, ws.tolist(), want.tolist())
    sums["wmax"] = wmax
    fig = rollout_figures(hp, sums)
    pairs = []
    if is_:
        pairs += [("rollout_is_mean", "rollout_is_mean"), ("rollout_is_max", "rollout_is_max")]
        if is_ == "token":
            pairs.append(("rollout_is_capped_frac", "rollout_is_ratio_fraction_high"))
        assert fig["rollout_is_capped_frac"] > 0, (name, "nothing capped")
    if rs:
        pairs += [("rollout_rs_masked_frac", "rollout_rs_masked_fraction"), ("rollout_rs_seq_masked_frac", "rollout_rs_seq_masked_fraction")]
        assert 0 < dropped < int(mask.sum()), (name, dropped, "the case does not test the rejection")
    for ours, theirs in pairs:
        assert abs(fig[ours] - metrics["rollout_corr/" + theirs]) < 1e-6, (name, ours, fig[ours], metrics["rollout_corr/" + theirs])
print(json.dumps({"ok": len(cases)}))
`
	out := pyvenv.Run(t, "the script's rollout correction against verl's", nil, py, "-c", code, filepath.Dir(script), helper)
	var res struct {
		Skip string `json:"skip"`
		OK   int    `json:"ok"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if res.Skip != "" {
		t.Skipf("verl does not import under %s: %s", py, res.Skip)
	}
	if res.OK != 14 {
		t.Errorf("%d cases compared, want 14", res.OK)
	}
}

// The script's update-level rollout figures are trainers/grpo.RolloutOf's
// (the numbers of its TestRolloutOf), and its mismatch_kl counts the
// tokens the rejection dropped (_scored), not only those trained.
func TestReferenceScriptRolloutOf(t *testing.T) {
	checkGRPOTrain(t, "rollout figures check", `
from grpo_train import rollout_of, mismatch
def step(mean, mx, capped, masked, seq, tokens, seqs):
    return {"rollout_is_mean": mean, "rollout_is_max": mx, "rollout_is_capped_frac": capped, "rollout_rs_masked_frac": masked,
            "rollout_rs_seq_masked_frac": seq, "_scored": tokens, "_seqs": seqs, "behaviour_kl": mean, "ratio_max": mx, "tokens": 1}
steps = [step(1, 2, 0.5, 0.25, 0.5, 4, 2), step(2, 3, 0, 1, 1, 1, 2), step(9, 9, 1, 1, 1, 5, 5)]
got = rollout_of(steps, 2)
want = {"rollout_is_mean": 6 / 5, "rollout_is_max": 3, "rollout_is_capped_frac": 2 / 5, "rollout_rs_masked_frac": 2 / 5,
        "rollout_rs_seq_masked_frac": 3 / 4}
assert set(got) == set(want) and all(abs(got[k] - want[k]) < 1e-15 for k in want), got
assert rollout_of([{"_scored": 3, "_seqs": 1, "tokens": 3}], 1) == {}
assert abs(mismatch(steps, 2)["mismatch_kl"] - 6 / 5) < 1e-15
`)
}

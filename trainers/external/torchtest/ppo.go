package torchtest

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// PPOBatch is Batch for PPO: n problems × g completions sampled from the
// adapter directory adapter ("" for the base model), with the
// advantages table the gae estimator hands the trainer — every scored
// row kept, even alone in its group, its advantage column the row's
// outcome reward.
func PPOBatch(t testing.TB, m *tiny.Model, adapter, dir string, seed uint64, n, g int) Files {
	t.Helper()
	f := batch(t, m, adapter, dir, seed, n, g, 0, 1)
	f.Tokens = 0
	for i := range f.Batch.Advantages {
		a := &f.Batch.Advantages[i]
		a.Advantage, a.Mask, a.Reason = f.Batch.Rewards[i].Total, false, ""
		f.Tokens += len(f.Batch.Trajectories[i].TokenIDs)
	}
	if err := tables.WriteFile(f.Advantages, tables.Advantages, f.Batch.Advantages, nil); err != nil {
		t.Fatal(err)
	}
	return f
}

// MeanReward is the mean outcome reward of f's rows.
func (f Files) MeanReward() float64 {
	s := 0.0
	for _, r := range f.Batch.Rewards {
		s += r.Total
	}
	return s / float64(max(len(f.Batch.Rewards), 1))
}

// TokenValues is one line of the script's --values-out: a trained row's
// per-token figures over its trainable tokens.
type TokenValues struct {
	PromptID    string    `json:"prompt_id"`
	SampleIndex int32     `json:"sample_index"`
	Rewards     []float64 `json:"rewards"`
	Values      []float64 `json:"values"`
	Returns     []float64 `json:"returns"`
	Advantages  []float64 `json:"advantages"`
}

// ReadValues reads a --values-out file.
func ReadValues(t testing.TB, path string) []TokenValues {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []TokenValues
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var v TokenValues
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s line %d: %v", path, len(out)+1, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

package ui

import (
	"reflect"
	"testing"
)

// A trainer's metrics file flattens to its numbers, and the metrics it
// wrote as null (kl at β = 0) are named as not computed rather than
// dropped or read as 0.
func TestFlattenNumbersNamesNulls(t *testing.T) {
	raw := []byte(`{"loss": -0.0025, "kl": null, "reward": {"mean": 0.5, "std": null}, "steps": [1, 2], "note": "x", "samples": "128"}`)
	nums, nulls := flattenNumbers(raw)
	wantNums := map[string]float64{"loss": -0.0025, "reward.mean": 0.5, "samples": 128}
	if !reflect.DeepEqual(nums, wantNums) {
		t.Errorf("numbers %v, want %v", nums, wantNums)
	}
	if want := []string{"kl", "reward.std"}; !reflect.DeepEqual(nulls, want) {
		t.Errorf("not computed %v, want %v", nulls, want)
	}
	if nums, nulls := flattenNumbers([]byte(`[1]`)); nums != nil || nulls != nil {
		t.Errorf("a JSON array: %v %v, want nil", nums, nulls)
	}
}

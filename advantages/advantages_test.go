package advantages

import (
	"math"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

func r(pid string, idx int32, total float64, status string) tables.Reward {
	return tables.Reward{PromptID: pid, SampleIndex: idx, Total: total, Status: status}
}

func TestCompute(t *testing.T) {
	rows := []tables.Reward{
		r("a", 0, 1, "ok"), r("a", 1, 0, "ok"), r("a", 2, 1, "ok"), r("a", 3, math.NaN(), "skipped: timeout"),
		r("b", 0, 1, "ok"), r("b", 1, 1, "ok"),
		r("c", 0, 0.5, "ok"),
	}
	adv, st := Compute(rows, Options{Epsilon: 1e-9})
	// Group a: rewards 1, 0, 1 → mean 2/3, sample std √(1/3) (the
	// population std √2/3 ×√(3/2)).
	mean, std := 2.0/3, math.Sqrt(1.0/3)
	if math.Abs(adv[0].Advantage-(1-mean)/(std+1e-9)) > 1e-12 || math.Abs(adv[1].Advantage-(0-mean)/(std+1e-9)) > 1e-12 {
		t.Fatalf("group a: %+v %+v", adv[0], adv[1])
	}
	if !adv[3].Mask || adv[3].Reason != "reward status skipped: timeout" || adv[3].Advantage != 0 || adv[0].GroupSize != 3 {
		t.Fatalf("failed rollout: %+v", adv[3])
	}
	if adv[4].Advantage != 0 || adv[4].Mask || adv[4].GroupStd != 0 {
		t.Fatalf("zero-variance group: %+v", adv[4])
	}
	if !adv[6].Mask || adv[6].Reason != "alone in its group" {
		t.Fatalf("lone sample: %+v", adv[6])
	}
	if st != (Stats{Groups: 3, MultiSample: 2, ZeroStd: 1, Masked: 2}) { // the lone sample's group is no zero-variance group
		t.Fatalf("stats = %+v", st)
	}
	// Dr. GRPO: no division by the standard deviation.
	adv, _ = Compute(rows, Options{NoStd: true})
	if math.Abs(adv[1].Advantage-(-mean)) > 1e-12 {
		t.Fatalf("no-std advantage = %v, want %v", adv[1].Advantage, -mean)
	}
}

package rewards

import (
	"testing"
	"time"
)

// workers: is how a function's batches are split, not what it computes:
// it is parsed, and it leaves the digest as it was; limits: are parsed.
func TestFunctionWorkersAndLimitsKeys(t *testing.T) {
	const base = "components:\n  - name: a\n    expr: '1.0'\nfunctions:\n  - name: f\n    function: r.py:f\n"
	parse := func(src string) *Spec {
		s, err := ParseSpec("s", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	without, with := parse(base), parse(base+"    workers: 2\n")
	if without.Functions[0].Workers != 0 || with.Functions[0].Workers != 2 || with.Functions[0].Keys["workers"].Line != 7 {
		t.Fatalf("parsed %+v and %+v", without.Functions[0], with.Functions[0])
	}
	limited := parse(base + "    limits: {wall: 90s, cpu_time: 2h, memory_mb: 4096}\n")
	if l := limited.Functions[0].Limits; l != (FunctionLimits{Wall: 90 * time.Second, CPUTime: 2 * time.Hour, MemoryMB: 4096}) ||
		limited.Functions[0].Keys["limits.memory_mb"].Line != 7 {
		t.Fatalf("parsed limits %+v, keys %v", l, limited.Functions[0].Keys)
	}
	if without.Digest() != with.Digest() {
		t.Fatalf("workers: 2 changed the digest: %s, was %s", with.Digest(), without.Digest())
	}
}

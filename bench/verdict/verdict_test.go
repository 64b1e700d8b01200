package main

import (
	"bytes"
	"strings"
	"testing"
)

// The figures of benchmark lines are read, the last of each kept, and
// each target gets its verdict.
func TestVerdicts(t *testing.T) {
	out := `goos: linux
BenchmarkTrackersDown-2   	       3	3011291234 ns/op	         1.033 down/plain	         0.9841 down/tracked
BenchmarkEmbeddedHTTPvsInProcess-2   	      10	  5 ns/op	  0.70 http/inprocess
BenchmarkEmbeddedHTTPvsInProcess-2   	      10	  5 ns/op	  0.93 http/inprocess
BenchmarkBranchCreate/large-2   	       1	  9 ns/op	  1.5 large/small
PASS
ok  	github.com/rlpipe/rlpipe/pipeline/driver	10.899s
`
	figs, err := parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) != 9 { // ns/op included
		t.Fatalf("%d figures: %+v", len(figs), figs)
	}
	var b bytes.Buffer
	met, notMet, notRun := verdicts(&b, figs)
	if met != 2 || notMet != 1 || notRun != len(targets)-3 {
		t.Errorf("met %d, not met %d, not run %d:\n%s", met, notMet, notRun, b.String())
	}
	for _, want := range []string{
		"MET      BenchmarkTrackersDown down/plain 1.033 ≤ 1.05",
		"MET      BenchmarkEmbeddedHTTPvsInProcess http/inprocess 0.93 ≥ 0.8",
		"NOT MET  BenchmarkBranchCreate large/small 1.5, target ≤ 1.2",
		"NOT RUN  BenchmarkRescore rlpipe/duckdb (target ≥ 1)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("verdicts lack %q:\n%s", want, b.String())
		}
	}
}

//go:build race

package cli

// raceOn is true when the tests run with -race: the detector slows the
// embedded model's numeric loops 5–10×, so a test that trains for long
// runs a short version of itself under it and the full length in the
// Makefile's test line without -race (TestArithmeticDemoLearns,
// TestChainLearns).
const raceOn = true

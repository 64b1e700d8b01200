//go:build race

package reasoninggymdemo

// raceOn is true when the tests run with -race: the detector slows the
// embedded model's numeric loops 5–10×, so TestReasoningGymDemoLearns runs in
// the Makefile's test line without -race instead.
const raceOn = true

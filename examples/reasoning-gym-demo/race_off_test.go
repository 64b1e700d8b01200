//go:build !race

package reasoninggymdemo

// raceOn is false without -race: see race_on_test.go.
const raceOn = false

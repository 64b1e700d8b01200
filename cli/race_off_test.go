//go:build !race

package cli

// raceOn is false without -race: see race_on_test.go.
const raceOn = false

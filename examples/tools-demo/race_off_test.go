//go:build !race

package main

// raceOn is false without -race: see race_on_test.go.
const raceOn = false

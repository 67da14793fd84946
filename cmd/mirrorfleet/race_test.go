//go:build race

package main

// The e2e tests build the binary with -race when they run with -race.
func init() { raceEnabled = true }

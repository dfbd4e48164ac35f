//go:build race

package main

// raceDetector is whether the tests run with the race detector, which
// makes the command use two to three times the memory.
const raceDetector = true

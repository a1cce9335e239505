//go:build race

package generator

// raceEnabled is true when the tests run under the race detector, which
// makes loading the multi-megabyte specs about ten times slower.
const raceEnabled = true

//go:build race

package runtime_test

// raceEnabled: the race detector allocates on its own.
const raceEnabled = true

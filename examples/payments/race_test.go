//go:build race

package main

// raceEnabled: the test binary runs under -race, so the example binary the
// end-to-end tests start is built with -race too.
const raceEnabled = true

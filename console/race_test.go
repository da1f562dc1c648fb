//go:build race

package console_test

// raceEnabled: the race detector slows every request several times over.
const raceEnabled = true

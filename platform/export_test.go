package platform

import "time"

// SetReadStallWarning sets how long ReadCommittedRange waits for a record before it warns, and
// returns the function that restores it.
func SetReadStallWarning(d time.Duration) (restore func()) {
	old := readStallWarning
	readStallWarning = d
	return func() { readStallWarning = old }
}

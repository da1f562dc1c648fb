package devstack

import (
	"os"
	"runtime/debug"
)

// DefaultMemoryLimit is the Go runtime's soft memory limit of the whole product in one process
// (`make run`, e2eload) unless GOMEMLIMIT is set (docs/operations.md#memory). Under a backlog
// every consumer holds a fetched response and every service its batch in flight; with the
// collector's default pace (GOGC=100) the heap then doubles its live size before a collection,
// which took the process to ~550 MB at 30,000 events a second. The soft limit makes the
// collector run sooner as the heap nears it instead (~350 MB, for ~5% more CPU). It is soft: a
// stack that needs more still gets it.
const DefaultMemoryLimit = 320 << 20

// SetDefaultMemoryLimit sets DefaultMemoryLimit unless GOMEMLIMIT is set (the runtime honours
// that one). Mains call it first.
func SetDefaultMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(DefaultMemoryLimit)
	}
}

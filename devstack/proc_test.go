package devstack_test

import (
	"os"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/devstack"
)

// TestProcessCPUSeconds: the CPU time of this process grows while it computes, and a process
// that does not exist has none.
func TestProcessCPUSeconds(t *testing.T) {
	before := devstack.ProcessCPUSeconds(os.Getpid())
	x := 0
	for start := time.Now(); time.Since(start) < 150*time.Millisecond; {
		x += x ^ 1
	}
	if after := devstack.ProcessCPUSeconds(os.Getpid()); after <= before {
		t.Errorf("CPU seconds %v then %v after 150 ms of work (x=%d)", before, after, x)
	}
	if got := devstack.ProcessCPUSeconds(-1); got != 0 {
		t.Errorf("no such process: %v", got)
	}
}

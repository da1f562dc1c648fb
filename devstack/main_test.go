package devstack_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine is still running after them: a Stack's
// Run returns only once every service it started has stopped every goroutine it started, and
// every test stops what it started itself (receivers, clients, browsers) by its end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

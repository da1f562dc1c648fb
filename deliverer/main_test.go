package deliverer_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine is still running after them: every
// goroutine a deliverer starts ends by the time Run returns (docs/delivery.md#crash-safety).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

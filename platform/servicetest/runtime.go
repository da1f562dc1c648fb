package servicetest

import (
	"os"
	"testing"
)

// RequireRuntime skips a test whose outside runtime (what: "node and npm", "Chromium") could
// not be found (err), loudly, or fails it when the environment variable env is 1: CI sets it,
// and there a missing runtime is a broken set-up, not a reason to skip. test names the test in
// the message.
func RequireRuntime(t testing.TB, env, test, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv(env) == "1" {
		t.Fatalf("%s: %s required (%s=1): %v", test, what, env, err)
	}
	t.Skipf("SKIPPING %s: %s not installed (%v)", test, what, err)
}

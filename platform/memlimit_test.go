package platform

import (
	"bytes"
	"errors"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestApplyMemoryLimit: the soft memory limit is 90% of the container's limit, unless
// GOMEMLIMIT is set or a lower limit (a service's own default) is in force; without a container
// limit nothing changes (docs/operations.md#memory).
func TestApplyMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	limit := func(n uint64, err error) func() (uint64, error) {
		return func() (uint64, error) { return n, err }
	}
	for _, c := range []struct {
		name      string
		env       string
		current   int64
		container func() (uint64, error)
		want      int64
		log       string
	}{
		{"container limit", "", math.MaxInt64, limit(512<<20, nil), 512 << 20 * 9 / 10, "set from the container's limit"},
		{"a lower default kept", "", 160 << 20, limit(512<<20, nil), 160 << 20, "lower than the container's limit allows"},
		{"a higher default lowered", "", 160 << 20, limit(128<<20, nil), 128 << 20 * 9 / 10, "set from the container's limit"},
		{"GOMEMLIMIT wins", "300MiB", math.MaxInt64, limit(128<<20, nil), math.MaxInt64, "from GOMEMLIMIT"},
		{"no container limit", "", math.MaxInt64, limit(0, errors.New("no limit")), math.MaxInt64, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", c.env)
			debug.SetMemoryLimit(c.current)
			var logs bytes.Buffer
			applyMemoryLimit(zerolog.New(&logs), c.container)
			if got := debug.SetMemoryLimit(-1); got != c.want {
				t.Errorf("memory limit %d, want %d", got, c.want)
			}
			if c.log != "" && !strings.Contains(logs.String(), c.log) {
				t.Errorf("log %q, want %q", logs.String(), c.log)
			}
		})
	}
}

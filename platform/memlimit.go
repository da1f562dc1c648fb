package platform

import (
	"math"
	"os"
	"runtime/debug"

	"github.com/rs/zerolog"
)

// The Go runtime's soft memory limit (docs/operations.md#memory). A container's memory limit is
// a hard wall the runtime knows nothing of: a heap that grows past it (a burst, a backlog) is
// OOM-killed instead of collected sooner. Every service's Command therefore sets the soft limit
// to memoryLimitRatio of the container's limit (cgroup v2 or v1, read by automemlimit), unless
// GOMEMLIMIT is set — the runtime honours it and so do we — or a lower limit is already in force
// (the deliverer's own default, deliverer/cmd/deliverer). Outside a container with a limit
// (make run, a bare process) nothing changes.

// memoryLimitRatio is the share of the container's limit the Go heap may use before the
// collector works harder; the rest is left to what the runtime does not count (goroutine
// stacks are counted; cgo, the binary, the kernel's buffers charged to the cgroup are not).
const memoryLimitRatio = 0.9

// applyMemoryLimit sets the runtime's soft memory limit from the container's limit that
// containerLimit reads (memlimit.FromCgroup), as the comment above says, and logs what it chose.
func applyMemoryLimit(logger zerolog.Logger, containerLimit func() (uint64, error)) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		logger.Info().Str("gomemlimit", v).Msg("Go memory limit from GOMEMLIMIT")
		return
	}
	current := debug.SetMemoryLimit(-1) // reads it
	limit, err := containerLimit()
	if err != nil || limit == 0 {
		if current != math.MaxInt64 {
			logger.Info().Int64("go_memory_limit_bytes", current).Msg("Go memory limit: the service's default (no container limit found)")
		}
		return
	}
	soft := int64(float64(limit) * memoryLimitRatio)
	if soft >= current {
		logger.Info().Uint64("container_limit_bytes", limit).Int64("go_memory_limit_bytes", current).
			Msg("Go memory limit: the service's default, lower than the container's limit allows")
		return
	}
	debug.SetMemoryLimit(soft)
	logger.Info().Uint64("container_limit_bytes", limit).Int64("go_memory_limit_bytes", soft).
		Msg("Go memory limit set from the container's limit")
}

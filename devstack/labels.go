package devstack

import (
	"context"
	"runtime/pprof"

	"github.com/tributary-cdp/tributary/platform"
)

// Every goroutine of the stack carries a profiler label naming its part — broker, config,
// ingest, router, deliverer, audiences, console — so that a CPU, blocking or mutex profile of
// the whole product (`make run` with -cpuprofile, e2eload's -cpuprofile) splits by service:
//
//	go tool pprof -tags cpu.prof        # seconds per service
//	go tool pprof -tagfocus service=router -top cpu.prof
//
// Goroutines inherit the labels of the goroutine that starts them, so a service's clients,
// consumers and HTTP servers are labelled by building and running it under its label
// (docs/benchmarks.md#where-the-time-goes).

// serviceLabel is the profiler label key of a part of the stack.
const serviceLabel = "service"

// buildAs labels the calling goroutine as part name until the next buildAs or endBuild:
// the goroutines a service's constructor starts (its Kafka clients') carry its label.
func buildAs(ctx context.Context, name string) {
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels(serviceLabel, name)))
}

// endBuild gives the calling goroutine back the labels of ctx.
func endBuild(ctx context.Context) { pprof.SetGoroutineLabels(ctx) }

// labelled is a Runner that runs r under the profiler label of part name.
type labelled struct {
	name string
	r    platform.Runner
}

func (l labelled) Run(ctx context.Context) error {
	var err error
	pprof.Do(ctx, pprof.Labels(serviceLabel, l.name), func(ctx context.Context) { err = l.r.Run(ctx) })
	return err
}

package platform

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Runner is one long-running part of a service: Run works until ctx is cancelled or it fails.
// On cancellation it should stop cleanly and return nil (or ctx.Err()).
type Runner interface {
	Run(ctx context.Context) error
}

// RunnerFunc adapts a function to a Runner.
type RunnerFunc func(ctx context.Context) error

// Run calls f(ctx).
func (f RunnerFunc) Run(ctx context.Context) error { return f(ctx) }

var _ Runner = RunnerFunc(nil)

// RunAll runs every runner concurrently. The first one to return, with an error or without,
// cancels the others (a service is whole or it is not running); so does the cancellation of
// ctx. RunAll waits for all of them and returns the errors.Join of their errors, leaving out
// nil and context.Canceled.
func RunAll(ctx context.Context, runners ...Runner) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(runners))
	var wg sync.WaitGroup
	for i, r := range runners {
		wg.Go(func() {
			defer cancel()
			if err := r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// SignalContext returns a context that is cancelled on SIGINT or SIGTERM (Kubernetes stops pods
// with SIGTERM), and the function that stops listening for them. It is for mains only: no
// other package handles signals.
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

package platform

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
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

// RunWithin is RunAll, except that once ctx is done it waits at most limit for the runners to
// return: past it, it returns an error naming the limit, leaving the runners behind (a command
// then exits; nothing they had not finished was committed). Each runner should bound its own
// stop well within limit; this is the backstop.
func RunWithin(ctx context.Context, limit time.Duration, runners ...Runner) error {
	done := make(chan error, 1)
	go func() { done <- RunAll(ctx, runners...) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("services did not stop within %s of the stop signal (SHUTDOWN_TIMEOUT); exiting with their work uncommitted", limit)
	}
}

// SignalContext returns a context that is cancelled on SIGINT or SIGTERM (Kubernetes stops pods
// with SIGTERM), and the function that stops listening for them. It is for mains only: no
// other package handles signals.
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

// DefaultShutdownGrace is SHUTDOWN_TIMEOUT's default: how long a service may take to stop
// after SIGTERM (finish in-flight work, hand it on, commit) before what is left is abandoned,
// uncommitted, to be done again after a restart.
const DefaultShutdownGrace = 10 * time.Second

// GraceContext returns a context that is cancelled grace after ctx is done (and not before):
// the deadline of a service's shutdown. Work that must finish after the stop signal (an HTTP
// request in progress, a record being handed on to the next topic, the last offset commit)
// runs under it, so it ends by the deadline even if Kafka or an endpoint never answers. The
// cancel function releases its resources; call it when the service has stopped.
func GraceContext(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(grace, cancel)
		context.AfterFunc(gctx, func() { t.Stop() })
	})
	return gctx, func() {
		stop()
		cancel()
	}
}

package platform_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tributary-cdp/tributary/platform"
)

// untilCancelled runs until its context is cancelled, then returns ret (counting the stop).
func untilCancelled(stopped *atomic.Int32, ret error) platform.Runner {
	return platform.RunnerFunc(func(ctx context.Context) error {
		<-ctx.Done()
		stopped.Add(1)
		if ret != nil {
			return ret
		}
		return ctx.Err()
	})
}

func TestRunAll(t *testing.T) {
	errBoom := errors.New("boom")
	errCleanup := errors.New("cleanup")
	tests := []struct {
		name        string
		first       platform.Runner // returns on its own (nil: none does)
		cancelAfter time.Duration   // cancel the parent context (0: never)
		others      []error         // what each other runner returns after cancellation
		want        []error         // errors the result must hold
		wantNil     bool
	}{
		{name: "first returns nil and stops the rest", first: platform.RunnerFunc(func(context.Context) error { return nil }),
			others: []error{nil, nil}, wantNil: true},
		{name: "first fails and stops the rest", first: platform.RunnerFunc(func(context.Context) error { return errBoom }),
			others: []error{nil, nil}, want: []error{errBoom}},
		{name: "errors while stopping are joined", first: platform.RunnerFunc(func(context.Context) error { return errBoom }),
			others: []error{errCleanup, nil}, want: []error{errBoom, errCleanup}},
		{name: "parent cancellation stops all", cancelAfter: 20 * time.Millisecond, others: []error{nil, nil, nil}, wantNil: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancelAfter > 0 {
				time.AfterFunc(tt.cancelAfter, cancel)
			}
			var stopped atomic.Int32
			var runners []platform.Runner
			for _, ret := range tt.others {
				runners = append(runners, untilCancelled(&stopped, ret))
			}
			if tt.first != nil {
				runners = append(runners, tt.first)
			}
			done := make(chan error, 1)
			go func() { done <- platform.RunAll(ctx, runners...) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("RunAll did not return")
			}
			if got := int(stopped.Load()); got != len(tt.others) {
				t.Errorf("%d runners stopped, want %d", got, len(tt.others))
			}
			if tt.wantNil && err != nil {
				t.Errorf("RunAll = %v, want nil", err)
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("RunAll = %v, want it to hold %v", err, w)
				}
			}
			if errors.Is(err, context.Canceled) {
				t.Errorf("RunAll = %v, holds context.Canceled", err)
			}
		})
	}
}

func TestRunAllNoRunners(t *testing.T) {
	if err := platform.RunAll(context.Background()); err != nil {
		t.Errorf("RunAll() = %v", err)
	}
}

func TestRunWithinGivesUpOnARunnerThatDoesNotStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		release := make(chan struct{})
		stuck := platform.RunnerFunc(func(ctx context.Context) error {
			<-ctx.Done()
			<-release // ignores its stop, like a produce waiting on a dead broker
			return nil
		})
		done := make(chan error, 1)
		go func() { done <- platform.RunWithin(ctx, 11*time.Second, stuck) }()
		time.Sleep(time.Minute)
		cancel()
		stopped := time.Now()
		err := <-done
		if err == nil || time.Since(stopped) != 11*time.Second {
			t.Fatalf("RunWithin returned %v after %s, want an error after 11s", err, time.Since(stopped))
		}
		close(release)
	})
}

func TestRunWithinReturnsOnceRunnersStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var stopped atomic.Int32
		done := make(chan error, 1)
		go func() { done <- platform.RunWithin(ctx, time.Hour, untilCancelled(&stopped, nil)) }()
		cancel()
		start := time.Now()
		if err := <-done; err != nil || time.Since(start) != 0 || stopped.Load() != 1 {
			t.Fatalf("RunWithin = %v after %s (stopped %d), want nil at once", err, time.Since(start), stopped.Load())
		}
	})
}

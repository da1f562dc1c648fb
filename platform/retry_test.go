package platform_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/platform"
)

func TestRetryUntilRetriesWithGrowingDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var at []time.Time
		start := time.Now()
		err := platform.RetryUntil(t.Context(), zerolog.Nop(), "testing", func(context.Context) error {
			at = append(at, time.Now())
			if len(at) < 6 {
				return errors.New("not yet")
			}
			return nil
		})
		if err != nil {
			t.Fatalf("RetryUntil: %v", err)
		}
		if len(at) != 6 {
			t.Fatalf("op called %d times, want 6", len(at))
		}
		if at[0] != start {
			t.Errorf("first try after %s, want at once", at[0].Sub(start))
		}
		// Jitter is ±50%: each gap lies within [0.5, 1.5] of the exponential schedule, capped.
		want := platform.RetryInitialInterval
		for i := 1; i < len(at); i++ {
			gap := at[i].Sub(at[i-1])
			if gap < want/2 || gap > want*3/2 {
				t.Errorf("gap %d is %s, want about %s", i, gap, want)
			}
			want = min(time.Duration(float64(want)*backoff.DefaultMultiplier), platform.RetryMaxInterval)
		}
	})
}

func TestRetryUntilStopsWhenContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		calls := 0
		err := platform.RetryUntil(ctx, zerolog.Nop(), "testing", func(context.Context) error {
			calls++
			return errors.New("broker unreachable")
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the context's", err)
		}
		if calls < 3 {
			t.Errorf("op called %d times in 3 s, want several", calls)
		}
	})
}

func TestRetryUntilPermanentErrorStops(t *testing.T) {
	calls := 0
	bad := errors.New("record too large")
	err := platform.RetryUntil(t.Context(), zerolog.Nop(), "testing", func(context.Context) error {
		calls++
		return backoff.Permanent(bad)
	})
	if !errors.Is(err, bad) || calls != 1 {
		t.Fatalf("err = %v after %d calls, want %v after 1", err, calls, bad)
	}
}

func TestGraceContextEndsGraceAfterParent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, stop := context.WithCancel(t.Context())
		gctx, cancel := platform.GraceContext(parent, 10*time.Second)
		defer cancel()
		time.Sleep(time.Hour)
		if gctx.Err() != nil {
			t.Fatal("grace context ended while its parent runs")
		}
		stop()
		stopped := time.Now()
		<-gctx.Done()
		if got := time.Since(stopped); got != 10*time.Second {
			t.Fatalf("grace context ended %s after its parent, want 10s", got)
		}
	})
}

func TestGraceContextCancelReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, stop := context.WithCancel(t.Context())
		defer stop()
		gctx, cancel := platform.GraceContext(parent, time.Minute)
		cancel()
		if gctx.Err() == nil {
			t.Fatal("cancel did not end the grace context")
		}
		stop()
		synctest.Wait() // no timer left behind: the bubble would report it at its end
	})
}

package platform

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/rs/zerolog"
)

// Retry delays: the first retry waits about RetryInitialInterval, each next one longer (with
// jitter), never more than RetryMaxInterval.
const (
	RetryInitialInterval = 100 * time.Millisecond
	RetryMaxInterval     = 5 * time.Second
)

// NewRetryBackOff returns the back-off schedule every retry-until-acknowledged loop of
// Tributary uses: exponential from RetryInitialInterval to RetryMaxInterval, with jitter,
// never giving up by itself (the caller's context ends it).
func NewRetryBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = RetryInitialInterval
	b.MaxInterval = RetryMaxInterval
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

// RetryUntil calls op until it returns nil, or ctx is done: the one retry-until-acknowledged
// loop of every service (handing records on to the next topic, writing the suppression list,
// forwarding the front door's batch). Each failure is logged at warn with what it was doing
// ("what", e.g. "producing to tracking.events"), then retried after NewRetryBackOff's next
// delay. An op error wrapped with backoff.Permanent stops the loop and is returned unwrapped.
// It returns nil once op succeeded, or ctx.Err() when ctx ended first (op's own error is then
// dropped: the work is left for whoever runs next, which is what every caller wants).
func RetryUntil(ctx context.Context, logger zerolog.Logger, what string, op func(ctx context.Context) error) error {
	tries := 0
	err := backoff.RetryNotify(func() error {
		tries++
		if err := ctx.Err(); err != nil {
			return backoff.Permanent(err)
		}
		return op(ctx)
	}, backoff.WithContext(NewRetryBackOff(), ctx), func(err error, next time.Duration) {
		logger.Warn().Err(err).Int("try", tries).Dur("retry_in", next).Msg(what + "; retrying")
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

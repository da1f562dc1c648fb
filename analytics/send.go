package analytics

import (
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// deliver sends b until every message is delivered or failed for good, retrying what the
// transport says is worth it under an exponential backoff with jitter, bounded by MaxRetries.
// It leaves each message's outcome in b.refs[i].err.
func (c *Client) deliver(b *batch) {
	todo := b.todo[:0]
	for i := range b.refs {
		todo = append(todo, int32(i))
	}
	b.todo = todo
	var bo backoff.BackOff // made on the first failure only
	var last error
	start := time.Now()
	for attempt := 1; ; attempt++ {
		if c.ctx.Err() != nil {
			fail(b, todo, errClosedWith(last))
			return
		}
		retry, err := c.tr.send(c.ctx, b, todo)
		if len(retry) == 0 {
			if err == nil {
				c.logf(false, "sent %d messages in %s (attempt %d)", len(b.refs), time.Since(start).Round(time.Microsecond), attempt)
			}
			return
		}
		last = err
		if c.ctx.Err() != nil {
			fail(b, retry, errClosedWith(last))
			return
		}
		if bo == nil {
			bo = backoff.WithMaxRetries(backoff.NewExponentialBackOff(
				backoff.WithInitialInterval(c.cfg.retryInitial),
				backoff.WithMaxInterval(c.cfg.retryMax),
				backoff.WithMultiplier(2),
				backoff.WithRandomizationFactor(0.5),
				backoff.WithMaxElapsedTime(0), // bounded by the number of retries
			), uint64(c.cfg.maxRetries))
		}
		wait := bo.NextBackOff()
		if wait == backoff.Stop {
			c.logf(true, "giving up on %d messages after %d attempts: %v", len(retry), attempt, err)
			fail(b, retry, &GiveUpError{Attempts: attempt, Err: err})
			return
		}
		var ra *RetryAfterError
		if errors.As(err, &ra) && ra.Wait > wait {
			wait = ra.Wait
		}
		c.logf(false, "attempt %d for %d messages failed (%v); retrying in %s", attempt, len(retry), err, wait.Round(time.Millisecond))
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			fail(b, retry, errClosedWith(last))
			return
		}
		todo = retry
	}
}

func fail(b *batch, idx []int32, err error) {
	for _, i := range idx {
		b.refs[i].err = err
	}
}

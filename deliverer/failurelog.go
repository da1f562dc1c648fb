package deliverer

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// failureSummaryEvery is how often, at most, a destination that keeps failing gets a summary
// line.
const failureSummaryEvery = 30 * time.Second

// failureLog makes delivery failures visible in the log without flooding it
// (docs/delivery.md#failures-in-the-log): the first failure of a destination — and the first of
// another kind while it fails — at warn, with the host, the status or error and when the
// message is retried; then at most one summary every 30 s while failures go on; and one line
// when the destination delivers again. Lines name the destination and the endpoint's host,
// never a URL's path or query, a body or a secret.
type failureLog struct {
	logger zerolog.Logger

	mu    sync.Mutex
	dests map[string]*destFailures
}

// destFailures is one failing destination.
type destFailures struct {
	kind     string    // the failure's kind: a status ("503") or an error class ("timeout")
	since    time.Time // the first failure of this run of failures
	total    int       // failed attempts since then
	window   int       // failed attempts since the last line
	lastLine time.Time
	// oldest is the first attempt of the oldest message that failed since the last line.
	oldest time.Time
}

func newFailureLog(logger zerolog.Logger) *failureLog {
	return &failureLog{logger: logger, dests: map[string]*destFailures{}}
}

// failed records a failed attempt of destID's message first tried at firstAttempt: host and
// status/errText say what failed (status 0: no answer), next when the message is tried again
// (zero: never, it went to the DLQ).
func (f *failureLog) failed(destID, host string, status int, errText string, firstAttempt, next, now time.Time) {
	kind := failureKind(status, errText)
	f.mu.Lock()
	df := f.dests[destID]
	first := df == nil || df.kind != kind
	if df == nil {
		df = &destFailures{since: now}
		f.dests[destID] = df
	}
	df.total++
	df.window++
	if df.oldest.IsZero() || firstAttempt.Before(df.oldest) {
		df.oldest = firstAttempt
	}
	summary := !first && now.Sub(df.lastLine) >= failureSummaryEvery
	window, oldest, last := df.window, df.oldest, df.lastLine
	if first || summary {
		df.kind, df.window, df.oldest, df.lastLine = kind, 0, time.Time{}, now
	}
	f.mu.Unlock()

	switch {
	case first:
		ev := f.logger.Warn().Str("destination", destID).Str("host", host).Str("failure", kind)
		if status != 0 {
			ev = ev.Int("status", status)
		}
		if errText != "" {
			ev = ev.Str("error", errText)
		}
		if next.IsZero() {
			ev = ev.Str("next_retry", "none: dead-lettered")
		} else {
			ev = ev.Time("next_retry", next)
		}
		ev.Msg("destination " + destID + " failing: " + describeKind(kind, status))
	case summary:
		f.logger.Warn().Str("destination", destID).Str("host", host).Str("failure", kind).
			Int("failed", window).Dur("in", now.Sub(last)).Dur("oldest_waiting", now.Sub(oldest)).
			Msg("destination " + destID + ": " + strconv.Itoa(window) + " attempts failed in " +
				now.Sub(last).Round(time.Second).String() + ", " + describeKind(kind, status) +
				"; oldest message waiting " + now.Sub(oldest).Round(time.Second).String())
	}
}

// delivered records a successful attempt: a destination that was failing has recovered.
func (f *failureLog) delivered(destID, host string, now time.Time) {
	f.mu.Lock()
	df := f.dests[destID]
	delete(f.dests, destID)
	f.mu.Unlock()
	if df != nil {
		f.logger.Info().Str("destination", destID).Str("host", host).Int("failed", df.total).
			Dur("after", now.Sub(df.since)).
			Msg("destination " + destID + " delivers again after " + strconv.Itoa(df.total) + " failed attempts in " +
				now.Sub(df.since).Round(time.Second).String())
	}
}

// breaker logs a host's circuit breaker opening (for period) or closing.
func (f *failureLog) breaker(host string, open bool, period time.Duration) {
	if open {
		f.logger.Warn().Str("host", host).Dur("for", period).Msg("circuit breaker opened: no request to " + host + " for " + period.String())
		return
	}
	f.logger.Info().Str("host", host).Msg("circuit breaker closed: " + host + " answers again")
}

// failureKind is a failure's kind: the status code when there was an answer, else the error's
// class (the text before the first ':', e.g. "timeout", "connection refused").
func failureKind(status int, errText string) string {
	if status != 0 {
		return strconv.Itoa(status)
	}
	for i := 0; i < len(errText); i++ {
		if errText[i] == ':' {
			return errText[:i]
		}
	}
	if errText == "" {
		return "error"
	}
	return errText
}

func describeKind(kind string, status int) string {
	if status != 0 {
		return kind + " " + http.StatusText(status)
	}
	return kind
}

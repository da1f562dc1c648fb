package schemas

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Kafka topic names (docs/topics.md). They are a public contract: producers outside Tributary write to
// TopicInbound and TopicDeletions, and operators read the others. docs/topics.md describes each.
const (
	// TopicInbound carries one Segment-spec JSON message per record from external Kafka
	// producers; the record header HeaderWriteKey names the source.
	TopicInbound = "tracking.inbound"
	// TopicEvents carries validated, enriched messages, keyed by userId, else anonymousId.
	TopicEvents = "tracking.events"
	// TopicRejected carries raw messages that failed validation, with HeaderReason.
	TopicRejected = "tracking.rejected"
	// TopicDeletions carries deletion (and suppression) requests, keyed by userId.
	TopicDeletions = "tracking.deletions"
	// TopicDeletionsStatus carries what the router did with each deletion request: one
	// DeletionStatus per tracking.deletions record it processed, keyed by the request id; the
	// other stores add a DeletionReport each, keyed "<request id>/<store>".
	TopicDeletionsStatus = "tracking.deletions.status"
	// TopicSuppressions is the compacted list of suppressed user ids, keyed by userId.
	TopicSuppressions = "tracking.suppressions"
	// TopicDedupe is the router's windowed de-duplication log: one record per routed batch and
	// tracking.events partition (same partition number), whose value is the 16-byte digests of
	// the batch's (source, messageId) pairs (docs/topics.md#routerdedupe).
	TopicDedupe = "router.dedupe"
	// TopicDeliveries carries the exact JSON bodies to POST, keyed by destination id + user.
	TopicDeliveries = "webhooks.deliveries"
	// TopicDLQ carries deliveries that failed permanently or ran out of retry window.
	TopicDLQ = "webhooks.dlq"
	// TopicDLQReplayed marks the dead letters that were replayed: key ReplayMarkKey ("<DLQ
	// partition>:<offset>"), value a ReplayMark, so a replay does not send them again.
	TopicDLQReplayed = "webhooks.dlq.replayed"
	// TopicParked keeps the deliveries of an auto-disabled destination until it is enabled
	// again, in the DLQ's record format (docs/delivery.md#auto-disable); TopicParkedReplayed
	// marks those re-enqueued, as TopicDLQReplayed does for the DLQ.
	TopicParked         = "webhooks.parked"
	TopicParkedReplayed = "webhooks.parked.replayed"
	// TopicNotices carries the operator notices, keyed by destination id: a JSON Notice of
	// type destination.failing or destination.disabled (docs/topics.md#tributarynotices).
	TopicNotices = "tributary.notices"
	// TopicAttempts carries one AttemptRecord per delivery attempt, keyed by destination id.
	TopicAttempts = "webhooks.attempts"
	// TopicConfig is the compacted tenant-config topic: keys "source/<id>",
	// "destination/<id>", "audience/<id>", "computed-trait/<id>"; a tombstone deletes.
	TopicConfig = "tributary.config"
	// TopicAudiencesState is the compacted changelog of the audiences store, keyed by userId.
	TopicAudiencesState = "audiences.state"
	// TopicAudiencesRepartition carries what one audiences partition hands to another
	// (profile merges, events of a merged id, deletion requests re-keyed by user, sync
	// ticks); it has as many partitions as tracking.events (docs/audiences.md#merging-profiles).
	TopicAudiencesRepartition = "audiences.repartition"
	// TopicSessions carries the console's signed-out sessions: one SessionRevocation per
	// session, keyed by the hash of its id; compacted, and kept only as long as a session lives
	// (docs/topics.md#tributarysessions).
	TopicSessions = "tributary.sessions"

	// TopicKeys is the compacted topic of the per-user data keys of crypto-shredding
	// (docs/topics.md#tributarykeys): key = the key id (32 hex digits), value = a DataKeyRecord;
	// a tombstone shreds the key, and with it every record sealed with it.
	TopicKeys = "tributary.keys"

	// RetryTopicPrefix starts the name of every retry tier topic: webhooks.retry.<delay>.
	RetryTopicPrefix = "webhooks.retry."
)

// Record header names (docs/topics.md).
const (
	HeaderWriteKey       = "write-key"
	HeaderSourceID       = "source-id"
	HeaderMessageID      = "message-id"
	HeaderType           = "type"
	HeaderReason         = "reason"
	HeaderDestinationID  = "destination-id"
	HeaderAttempt        = "attempt"
	HeaderFirstAttemptAt = "first-attempt-at"
	HeaderDueAt          = "due-at"
	HeaderLastError      = "last-error"
	HeaderLastStatus     = "last-status"
	// HeaderDeferrals counts the times a delivery went to a retry tier unsent (its endpoint at
	// its limit, paused or behind an open breaker): each deferral waits for a longer tier.
	HeaderDeferrals = "deferrals"
	// HeaderURL, on a webhooks.deliveries record (a dead letter replayed to another URL),
	// sends it to that one URL instead of the destination's webhooks, signed with the
	// destination's secret and with the static headers of its first webhook entry. Its value
	// passes CheckWebhookURL. Retry tiers and the DLQ keep it.
	HeaderURL = "url"
	// HeaderTest, with the value "1", makes a webhooks.deliveries record a test delivery (the
	// console's event tester): POSTed once to every URL of the destination, never retried
	// nor dead-lettered, each POST logged on webhooks.attempts with "test":true.
	HeaderTest = "test"
	// HeaderDataKey names the data key a record's value is sealed with (crypto-shredding,
	// docs/topics.md#sealed-values): the value is then a sealed value, not the topic's plain
	// format. A record without it is plain.
	HeaderDataKey = "tributary-key"
	// HeaderUserKey names the data key of the user a plain record is about (a
	// webhooks.attempts record of a sealed delivery that holds no answer of the endpoint:
	// docs/topics.md#sealed-values). The value is plain; a reader drops the record when that
	// key was shredded, as it drops a sealed one.
	HeaderUserKey = "tributary-user-key"
	// HeaderReplay, on a webhooks.deliveries record, names the replay that produced it (the
	// console's replays, docs/delivery.md#replay): the deliverer sends it as the
	// X-Tributary-Replay header of every POST (HeaderXTributaryReplay) and writes it as the
	// replayId of the attempt records. Retry tiers and the DLQ keep it.
	HeaderReplay = "replay"
)

// HeaderXTributaryReplay is the HTTP header of a replayed webhook: the replay's id
// (docs/receivers.md#headers).
const HeaderXTributaryReplay = "X-Tributary-Replay"

// CheckWebhookURL returns an error unless raw is an absolute http or https URL with a host, no
// white space and at most MaxWebhookURLBytes (what a destination's webhook URL must be). The
// error never holds raw's credentials.
func CheckWebhookURL(raw string) error {
	if len(raw) > MaxWebhookURLBytes {
		return fmt.Errorf("is %d bytes long: a webhook URL may have at most %d", len(raw), MaxWebhookURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || strings.ContainsAny(raw, " \t\r\n") {
		return fmt.Errorf("must be an absolute http or https URL with a host, got %q", RedactURL(raw))
	}
	return nil
}

// RetryTopic names the retry tier topic for one delay, e.g. 10s → "webhooks.retry.10s",
// 1m → "webhooks.retry.1m", 1h30m → "webhooks.retry.1h30m". Whole hours, minutes and seconds
// print without the zero units that time.Duration.String adds ("1m", not "1m0s").
func RetryTopic(delay time.Duration) string {
	return RetryTopicPrefix + ShortDuration(delay)
}

// ShortDuration prints d like time.Duration.String but drops zero trailing units:
// 1h0m0s → "1h", 1m0s → "1m", 90s → "1m30s", 1500ms → "1.5s".
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// DefaultRetrySchedule is the default of RETRY_SCHEDULE, the delay before each retry of a
// delivery (docs/delivery.md#retry-tiers): the deliverer and the topic bootstrap (one tier topic per
// distinct delay) must agree on it, so both take it from here.
const DefaultRetrySchedule = "10s,1m,5m,15m,30m,1h,1h,1h"

// DefaultRetryDelays returns DefaultRetrySchedule parsed: a new slice on each call.
func DefaultRetryDelays() []time.Duration {
	d, err := ParseRetrySchedule(DefaultRetrySchedule)
	if err != nil {
		panic(err) // the constant above is valid; TestParseRetrySchedule says so
	}
	return d
}

// ParseRetrySchedule parses RETRY_SCHEDULE ("10s,1m,5m"): the delay before each retry.
// Every delay must be positive.
func ParseRetrySchedule(s string) ([]time.Duration, error) {
	var out []time.Duration
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		d, err := time.ParseDuration(part)
		if err != nil {
			return nil, fmt.Errorf("RETRY_SCHEDULE: entry %d %q: %w", i+1, part, err)
		}
		if d <= 0 {
			return nil, fmt.Errorf("RETRY_SCHEDULE: entry %d %q: must be positive", i+1, part)
		}
		out = append(out, d)
	}
	return out, nil
}

// ValidateRetryDelays returns every problem of a retry schedule held in settings
// (RETRY_SCHEDULE): no delay at all, or a delay that is not positive.
func ValidateRetryDelays(delays []time.Duration) error {
	var errs []error
	if len(delays) == 0 {
		errs = append(errs, errors.New("RETRY_SCHEDULE: at least one delay"))
	}
	for i, d := range delays {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("RETRY_SCHEDULE: entry %d must be positive", i+1))
		}
	}
	return errors.Join(errs...)
}

// The W3C trace-context headers (docs/topics.md#trace-context): on a tracking.inbound,
// tracking.events, webhooks.deliveries, retry tier or DLQ record, the trace the event belongs
// to (docs/operations.md#tracing). Every record derived from one keeps them; a record without
// them starts no trace of its own unless span export is on.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

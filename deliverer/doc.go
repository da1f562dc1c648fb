// Package deliverer POSTs the delivery records of webhooks.deliveries to the destinations'
// webhook URLs, signed (X-Signature, optionally Standard Webhooks), and retries failures through
// the Kafka retry tiers webhooks.retry.<delay> for up to RETRY_WINDOW (4 h) before they go to
// the dead-letter queue webhooks.dlq. Every attempt is logged to webhooks.attempts.
//
// Delivery is at least once: a record's offset is committed only after it was delivered, or
// handed on to its next tier or the DLQ and acknowledged there. A slow or dead endpoint never
// holds back the others: requests run concurrently with a bound per endpoint host and a global
// bound, and a record whose host is at its bound or whose circuit breaker is open goes to a
// retry tier instead of blocking its partition; a retry-tier record that comes due while its
// endpoint's breaker is open waits in memory (parked, uncommitted) instead of being rewritten
// (docs/delivery.md#parked-records-wait-for-their-endpoint).
//
// The POSTs go through webhookClient (sender.go): a lean HTTP/1.1 client (lean.go: its own
// connection pool per host, fasthttp's answer parser, nearly no allocation per POST) for
// http:// URLs and HTTPS hosts that do not choose HTTP/2, net/http for those that do. Both dial
// through the address guard (guard.go) with the same TLS settings, send the same bytes and keep
// the same deadline and stale-connection retry (docs/delivery.md#http-client).
//
// Nothing of a suppressed user, nor of a deleted user accepted before the deletion, leaves after
// the deliverer read the regulation: every record is checked against platform.Regulations when it
// is dispatched, right before its POST and before it is handed on, and dropped, never the delete
// notice (regulations.go; docs/delivery.md#deleted-and-suppressed-users).
//
// A retry-now copy (header retry-now, written by the console) of a record waiting in a tier is
// sent once, at once; its outcome is marked in webhooks.retried-now, which every deliverer reads
// whole and follows, so that the tier record is finished unsent when it comes due if the copy
// delivered it (retrynow.go; docs/delivery.md#retry-now).
//
// A destination with settings.autoDisable whose attempts have all failed for its budget is
// written disabled to tributary.config, with notices at 50, 90 and 100 % (log, tributary.notices,
// OPERATOR_WEBHOOK_URL); its deliveries are parked on webhooks.parked meanwhile and re-enqueued
// once it is enabled again (autodisable.go; docs/delivery.md#auto-disable).
//
// docs/delivery.md describes the behaviour; docs/receivers.md what receivers see.
package deliverer

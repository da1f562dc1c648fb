// Package ingest is Tributary's front door: the Segment tracking API over HTTP (/v1/identify,
// /v1/track, /v1/page, /v1/screen, /v1/group, /v1/alias, /v1/batch, /v1/import) and a Kafka
// consumer of tracking.inbound for producers that write straight to Kafka.
//
// Every accepted message is validated (schemas.Message.Validate), enriched (messageId,
// receivedAt, originalTimestamp, a clock-skew-corrected timestamp, context.ip) and produced to
// tracking.events keyed by userId, else anonymousId, with the headers source-id, message-id and
// type. The HTTP API answers 200 only after Kafka acknowledged every record of the request
// (idempotent producer, acks from all in-sync replicas); when the broker does not acknowledge
// within Config.ProduceTimeout it answers 503 and the client retries. Messages that fail
// validation inside a batch go, as sent, to tracking.rejected with a reason header; the rest of
// the batch is accepted. The inbound consumer commits its offsets only after forwarding.
//
// See docs/ingest.md for the API and docs/topics.md for the record formats.
package ingest

// Package audiences is the audiences service: it keeps one profile per user from
// tracking.events (traits merged from identify calls, per-event counters and property
// aggregates in time buckets), evaluates the config's computed traits and audience rules over
// them, and sends every change as an identify call to tracking.events, which the router
// delivers to the source's destinations like any other (docs/audiences.md).
//
// State lives in memory per owned partition and is backed by the compacted changelog
// audiences.state; the profile update, its changelog record, the identify calls it causes
// and the input offsets commit in one Kafka transaction (platform.Pipe, exactly once).
// Profiles whose ids live on different partitions (an anonymous id and the user id it is
// merged into) meet through audiences.repartition, read in the same transactions.
//
// A deletion request tombstones the user's profile and, partition after partition, the
// redirects of the ids merged into it, then reports on tracking.deletions.status in the
// transaction of the last tombstone (docs/audiences.md#deletion-and-suppression).
//
// The profile API (Service.Handler) answers from the instance that owns a user's partition,
// forwarding to it when needed.
package audiences

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
// The profile API (Service.Handler), and Segment's Profile API beside it, answer from the
// instance that owns a user's partition, forwarding to it when needed.
//
// Where each concern lives:
//
//   - service.go: the wiring: Deps, New, Run (the events pipe, the deletions pipe, the sync
//     ticker, the profile API's server), the partitioner, the check of the topics' partition
//     counts.
//   - partitions.go: partition ownership: assignment, revocation, readiness, the restore of
//     an owned partition from audiences.state, a user id's partition.
//   - handoff.go: the audiences.repartition protocol: the op record (merge, absorb, event,
//     delete, forget, tick), its encoding, the sync ticker, the forwarding of
//     tracking.deletions, and how the owner of a profile applies each op.
//   - transform.go: one transaction: each record of the poll opened and applied (a message to
//     its profile, an op), the changelog records of what changed, the sealing of what is
//     written.
//   - identity.go: identity resolution on external ids (email, context.externalIds) and the
//     identity rules: the link, join and note ops, what a profile records of its merges and
//     refusals (docs/audiences.md#identity-resolution).
//   - sync.go: profile → identify calls: the sync of a profile (audiences, computed traits,
//     removed definitions) and of a partition, the identify call built, the sync figures.
//   - backfill.go: an aggregate new to the config computed from tracking.events' retention
//     by a reader beside the partition's consumer, up to the offset the live path started
//     at, and merged in the partition's transactions; definitions wait for it
//     (docs/audiences.md#backfill).
//   - model.go: the config compiled for evaluation. profile.go, series.go, value.go, codec.go
//     and intern.go: a profile, its time buckets, its values, its changelog encoding, the
//     strings profiles share. api.go: the profile API. segmentapi.go: Segment's Profile API
//     (docs/audiences.md#segment-profile-api) on the same address; tracks.go: the recent track
//     events a profile keeps for it. config.go, metrics.go.
package audiences

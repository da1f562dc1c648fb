// Package shred is crypto-shredding (docs/security.md#crypto-shredding): every message of a
// user is sealed, on its way into Kafka, with a data key of that user, and the user's data is
// deleted everywhere at once by deleting the key. Kafka cannot delete one record from a log,
// but once the key is gone every copy of the user's records — tracking.events,
// tracking.rejected, webhooks.deliveries, the retry tiers, the DLQ, audiences.state — is
// unreadable, wherever it was copied, for the rest of its retention.
//
// The data keys live on the compacted topic tributary.keys (schemas.TopicKeys,
// docs/topics.md#tributarykeys): record key = the key id (16 random bytes, 32 hex digits),
// value = a DataKeyRecord naming the SHA-256 of the subject (never the subject itself) and the
// 32-byte AES-256 key, itself sealed with the master key (DATA_ENCRYPTION_KEY, else
// CONFIG_ENCRYPTION_KEY) when one is set. A tombstone shreds the key; compaction then removes
// it from the brokers' disks.
//
// A Keyring follows the topic (platform.TopicReader) and holds every live key in memory
// (about 1 KB each, mostly the AES-GCM state: docs/security.md#crypto-shredding). The
// subject of a message is its userId, else its anonymousId: the record key of
// tracking.events.
//
// A sealed record has the header tributary-key (schemas.HeaderDataKey) naming its key, and
// the value
//
//	0x01 ‖ nonce (12 bytes) ‖ AES-256-GCM(plain) with the key id as additional data
//
// The record key and the other headers are not sealed: routing and partitioning need them,
// so the record key (the userId) stays readable — it is the identifier the deletion names,
// not the data it deletes. A record without the header is plain, and is read as it is
// (external producers, SHRED_EVENTS=false).
//
// A key is durable before it is used: Seal produces the key record and waits for Kafka's
// acknowledgement before it returns a value sealed with it. A reader that meets a key id it
// has not read yet (written by another process a moment ago) waits until it has read the
// keys topic up to the end offset of the key's partition at the miss, then looks again; a key
// still unknown, or tombstoned, is shredded (ErrShredded), and every consumer drops the record
// as deleted.
package shred

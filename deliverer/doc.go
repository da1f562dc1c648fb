// Package deliverer will POST webhook bodies to customer endpoints, signed, with retry tiers on
// Kafka for up to four hours, a dead-letter topic, an attempt log and per-endpoint isolation.
package deliverer

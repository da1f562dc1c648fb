// Package analytics is the Go client library of Tributary (seed 001): it records identify,
// track, page, screen, group and alias calls from Go programs and sends them, in batches and
// from background goroutines, to Tributary's ingest (the Segment tracking API) or straight to
// Kafka. See docs/client.md for the full guide.
package analytics

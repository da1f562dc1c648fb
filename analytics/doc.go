// Package analytics will be the Go client library of seed 001: it queues identify, track, page,
// screen, group and alias calls and sends them in batches to Tributary's ingest.
package analytics

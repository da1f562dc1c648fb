// Package console will serve the admin REST API and web UI: sources, destinations, audiences,
// deletions, the delivery log and DLQ replay.
package console

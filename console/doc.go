// Package console serves the admin REST API (console/openapi.yaml) and the web UI: sources,
// destinations, audiences, deletions, the delivery log and DLQ replay, the config export and
// import (docs/console.md). A destination's secrets — shared secrets, static header values, URL
// credentials — are write-only: masked in answers and pages, references in the export
// (secrets.go, docs/console.md#secrets). Its views — the delivery log, the source debugger, the
// DLQ, regulations, the retry tiers' backlog — hold their state in console/internal/views,
// each behind its own lock and methods; this package is the service (service.go), the readers
// that follow each view's Kafka topics in memory, one platform.TopicReader each (runView, the
// *_reader.go files, decoding only the members of a record they keep: decode.go), the API
// handlers (the *_api.go files and the rest of routes) and the UI handlers (ui_*.go), which
// read the views only through their query methods (docs/architecture.md#console-layers). The
// views forget a deleted or suppressed user's entries, and read the regulations before
// anything else at start (forget.go, docs/console.md#what-the-console-forgets); sessions stay
// in this package (sessions.go).
package console

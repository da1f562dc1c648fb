// Package console serves the admin REST API (console/openapi.yaml) and the web UI: sources,
// destinations, audiences, deletions, the delivery log and DLQ replay, the config export and
// import (docs/console.md). A destination's secrets — shared secrets, static header values, URL
// credentials — are write-only: masked in answers and pages, references in the export
// (secrets.go, docs/console.md#secrets). Its views — the delivery log, the messages, the health
// of each destination's messages, the source debugger, the DLQ, regulations, the retry tiers'
// backlog, the messages waiting in the tiers (pending retries, which "retry now" sends at once:
// pending_api.go) — hold their state in console/internal/views,
// each behind its own lock and methods; this package is the service (service.go), the readers
// that follow each view's Kafka topics in memory, one platform.TopicReader each (runView, the
// *_reader.go files, decoding only the members of a record they keep: decode.go), the API
// handlers (the *_api.go files and the rest of routes) and the UI handlers (ui_*.go), which
// read the views only through their query methods (docs/architecture.md#console-layers). The
// views forget a deleted or suppressed user's entries, and read the regulations before
// anything else at start (forget.go, docs/console.md#what-the-console-forgets); sessions stay
// in this package (sessions.go). A principal without the PII grant sees the views' message
// content masked, ids as stable hashes, and may not search by user id (pii.go,
// docs/console.md#pii-access): the handlers that answer message content mask what they read.
// Every change, sign-in, sign-out and refusal is recorded on tributary.audit once it succeeded
// (audit.go), and read back into views.Audit for the audit page and GET /v1/audit
// (audit_reader.go, audit_api.go, docs/console.md#audit-trail).
//
// Config writes have one service layer, configwrite.go (with configobject.go): methods that take
// a context, a kind and id, a patch or an object and writeOptions, and return the snapshot that
// holds the change or an *apiError the front ends show. The API's handlers (api_objects.go) and
// the UI's (ui_*.go) only read their request, call it and answer; no UI handler calls an API
// handler (docs/architecture.md#console-layers).
package console

// Package console serves the admin REST API (console/openapi.yaml) and the web UI: sources,
// destinations, audiences, deletions, the delivery log and DLQ replay, the config export and
// import (docs/console.md). A destination's secrets — shared secrets, static header values, URL
// credentials — are write-only: masked in answers and pages, references in the export
// (secrets.go, docs/console.md#secrets). Its views — the delivery log, the source debugger, the
// DLQ, regulations, sessions — follow their Kafka topics in memory, one platform.TopicReader each (runView),
// and decode only the members of a record they keep (decode.go). They forget a deleted or
// suppressed user's entries, and read the regulations before anything else at start
// (forget.go, docs/console.md#what-the-console-forgets).
package console

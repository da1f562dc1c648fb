// Package schemas is Tributary's contract: the Segment-spec message types and their validation,
// the delivered webhook body, Kafka topic and record-header names, the tenant config model, and
// every other wire format one service writes and another reads, each declared once
// (docs/architecture.md#shared-runtime-one-way-to-do-each-thing): the attempt log's records and
// error classes (AttemptRecord, Classes), the DLQ's replay marks (ReplayMark), the profile API's
// bodies (ProfileView, AudienceView, PreviewRequest, PreviewView...), deletion requests and
// session revocations.
package schemas

// Package schemas is Tributary's contract: the Segment-spec message types and their validation,
// the delivered webhook body, Kafka topic and record-header names, and the tenant config model.
package schemas

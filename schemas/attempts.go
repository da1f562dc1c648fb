package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// The attempt log, webhooks.attempts (docs/topics.md#webhooksattempts): one AttemptRecord per
// POST, written by the deliverer and read by the console's delivery log. Its error classes are
// the outcomes of docs/delivery.md#outcome-one-function-decides; the deliverer's classifier
// returns only these, and the console counts each by name.

// ErrorClass is the outcome class of one POST: the errorClass of an AttemptRecord, the reason
// of a dead letter for a permanent failure (docs/topics.md#webhooksdlq).
type ErrorClass string

// Error classes, in the order of Classes.
const (
	// ClassOK: a 2xx answer.
	ClassOK ErrorClass = "ok"

	// Retryable failures (ErrorClass.Retryable): tried again on the next retry tier.

	// ClassTimeout: no answer within DELIVERY_TIMEOUT.
	ClassTimeout ErrorClass = "timeout"
	// ClassConnection: the connection was refused or reset, DNS failed...
	ClassConnection ErrorClass = "connection"
	// ClassStatus5xx: a 5xx answer.
	ClassStatus5xx ErrorClass = "status_5xx"
	// ClassStatus408: a 408 answer.
	ClassStatus408 ErrorClass = "status_408"
	// ClassStatus429: a 429 answer.
	ClassStatus429 ErrorClass = "status_429"

	// Permanent failures: to the DLQ at once.

	// ClassStatus4xx: another 4xx answer, or a 1xx or 3xx (redirects are not followed).
	ClassStatus4xx ErrorClass = "status_4xx"
	// ClassTLS: the endpoint's certificate was refused: no request was sent.
	ClassTLS ErrorClass = "tls"
	// ClassBlockedAddress: the host resolved to an address egress may not reach
	// (docs/security.md).
	ClassBlockedAddress ErrorClass = "blocked_address"
	// ClassInvalidURL: a webhook URL no request can be made of.
	ClassInvalidURL ErrorClass = "invalid_url"
	// ClassInvalidRequest: a request no HTTP client may send as it is — a messageId or a
	// static header value holding a control character, or anything else net/http refuses
	// before it connects. Nothing was sent, and no retry would change that.
	ClassInvalidRequest ErrorClass = "invalid_request"
	// ClassDestinationUnavailable: the destination was deleted or disabled since routing.
	ClassDestinationUnavailable ErrorClass = "destination_unavailable"

	// Not sent, ever: the message's user is suppressed, or was deleted after the message was
	// accepted (docs/delivery.md#deleted-and-suppressed-users), or its body is sealed with a
	// data key that was shredded (docs/security.md#crypto-shredding). The record is finished,
	// neither retried nor dead-lettered; its attempt record has status 0 and no url.

	// ClassSuppressed: the message's user is suppressed.
	ClassSuppressed ErrorClass = "suppressed"
	// ClassDeleted: the message's user was deleted, or its data key shredded.
	ClassDeleted ErrorClass = "deleted"

	// ClassFiltered: no POST either, and not the deliverer's: the router dropped the message
	// for this destination before delivery (docs/routing.md#filtered-records); the record's
	// Reason says why. Status 0, url empty, attempt 0.
	ClassFiltered ErrorClass = "filtered"
)

// errorClasses is every ErrorClass, ClassOK first.
var errorClasses = [...]ErrorClass{
	ClassOK,
	ClassTimeout, ClassConnection, ClassStatus5xx, ClassStatus408, ClassStatus429,
	ClassStatus4xx, ClassTLS, ClassBlockedAddress, ClassInvalidURL, ClassInvalidRequest, ClassDestinationUnavailable,
	ClassSuppressed, ClassDeleted,
	ClassFiltered,
}

// ErrorClassCount is how many error classes there are (len(Classes())), a constant: a reader
// may size an array of counters by class with it.
const ErrorClassCount = len(errorClasses)

// Classes returns every error class, ClassOK first, in the order of the constants. The caller
// owns the slice.
func Classes() []ErrorClass { return slices.Clone(errorClasses[:]) }

// Retryable reports whether a failure of this class is tried again (on the next retry tier).
func (c ErrorClass) Retryable() bool {
	switch c {
	case ClassTimeout, ClassConnection, ClassStatus5xx, ClassStatus408, ClassStatus429:
		return true
	}
	return false
}

// AttemptRecord is the value of one webhooks.attempts record (docs/topics.md#webhooksattempts),
// keyed by destination id: one POST of a delivery to one URL, or a record the deliverer
// dropped unsent (ClassSuppressed, ClassDeleted: status 0, url empty). The deliverer writes it
// with a hand-written encoder of these fields, in this order (deliverer/attempts.go); a reader
// decodes it with DecodeAttemptRecord, or reads the members it needs by these JSON names.
type AttemptRecord struct {
	DestinationID string `json:"destinationId"`
	MessageID     string `json:"messageId"`
	// URL is the URL posted to, without credentials (RedactURL); empty on a record dropped
	// unsent.
	URL string `json:"url"`
	// Attempt is the delivery's attempt number, from 1.
	Attempt int `json:"attempt"`
	// Status is the HTTP status of the answer; 0 when no answer came.
	Status int `json:"status"`
	// LatencyMs is how long the POST took, in milliseconds (microsecond precision).
	LatencyMs  float64    `json:"latencyMs"`
	ErrorClass ErrorClass `json:"errorClass"`
	// Error is what went wrong, "<class>: <detail>" (never the URL's query); absent on ClassOK.
	Error string `json:"error,omitempty"`
	// ConcurrencyLimit is the endpoint host's concurrency limit after this POST
	// (docs/delivery.md#concurrency-found-per-endpoint); 0 when the host had none yet.
	ConcurrencyLimit int `json:"concurrencyLimit"`
	// PausedForMs is what is left of the host's Retry-After pause; absent when not paused.
	PausedForMs int64 `json:"pausedForMs,omitempty"`
	// Test marks a POST of a test delivery (docs/delivery.md#test-deliveries); absent otherwise.
	Test bool `json:"test,omitempty"`
	// At is when the attempt ended (FormatTimestamp); on a ClassFiltered record, when the
	// router routed the message's batch.
	At string `json:"at"`

	// What the message is (docs/topics.md#webhooksattempts), absent when unknown: a record of
	// an older deliverer, or a body that did not open (ClassDeleted).

	// Type is the message's type (the delivery's type header): track, identify, page...
	Type string `json:"type,omitempty"`
	// Event is a track's event name, a page's or screen's name.
	Event       string `json:"event,omitempty"`
	UserID      string `json:"userId,omitempty"`
	AnonymousID string `json:"anonymousId,omitempty"`
	// ReceivedAt is when ingest accepted the message (the body's receivedAt, else the
	// delivery's first-attempt-at header; FormatTimestamp).
	ReceivedAt string `json:"receivedAt,omitempty"`

	// What became of the delivery after this attempt: NextAttemptAt when it was handed to a
	// retry tier (when the tier delivers it again), DeadLettered (the dead letter's reason,
	// docs/topics.md#webhooksdlq) when it went to the DLQ; neither when it was delivered or is
	// not retried (a test delivery, a record dropped unsent).
	NextAttemptAt string `json:"nextAttemptAt,omitempty"`
	DeadLettered  string `json:"deadLettered,omitempty"`

	// The endpoint's answer: at most MaxAnswerHeaders of its headers (canonical names, each
	// value at most MaxAnswerHeaderValue bytes) and the first MaxAnswerBody bytes of its body
	// as text (invalid UTF-8 replaced by U+FFFD); absent when no answer came.
	ResponseHeaders map[string]string `json:"responseHeaders,omitempty"`
	ResponseBody    string            `json:"responseBody,omitempty"`

	// Reason is why the router dropped the message for the destination, on a ClassFiltered
	// record only (absent otherwise).
	Reason FilterReason `json:"reason,omitempty"`
	// Filter names the destination filter that dropped the message, on a ClassFiltered record
	// of reason FilterDestinationFilter (absent otherwise, and on an older router's record).
	Filter string `json:"filter,omitempty"`

	// ReplayID names the replay whose delivery this POST was (the header replay of the
	// delivery record, docs/delivery.md#replay); absent for any other.
	ReplayID string `json:"replayId,omitempty"`
}

// Bounds of the answer an AttemptRecord keeps.
const (
	// MaxAnswerHeaders is how many of an answer's headers an attempt record keeps (the first
	// ones, by name).
	MaxAnswerHeaders = 20
	// MaxAnswerHeaderValue is how many bytes of a header's value it keeps.
	MaxAnswerHeaderValue = 256
	// MaxAnswerBody is how many bytes of an answer's body it keeps.
	MaxAnswerBody = 4 << 10
)

// BodySummary is what an attempt record says of the message a delivery body holds: the raw
// JSON values (quotes included, aliasing the body; nil when absent) of its members type,
// userId, anonymousId, event (else name) and receivedAt.
type BodySummary struct {
	Type, UserID, AnonymousID, Event, ReceivedAt []byte
}

// errSummaryDone stops SummarizeBody's scan.
var errSummaryDone = errors.New("summary done")

// SummarizeBody reads a delivery body's BodySummary with the member scanner, without decoding
// the body: a canonical body (Message.AppendJSON, docs/receivers.md#the-body) names those
// members before properties, traits, context and integrations, so the scan stops at the first
// of these. A body that is not a JSON object gives what was read before the error.
func SummarizeBody(body []byte) BodySummary {
	var s BodySummary
	var name []byte
	// The scan stops at a member it need not read, before its value is scanned.
	stop := func(key []byte, esc bool, _ []byte, i int) (int, bool, error) {
		if !esc {
			switch string(key[1 : len(key)-1]) {
			case "properties", "traits", "context", "integrations":
				return i, false, errSummaryDone
			}
		}
		return i, false, nil
	}
	_ = eachMemberScan(body, stop, func(k []byte, esc bool, v []byte) error {
		if esc {
			return nil
		}
		switch string(k[1 : len(k)-1]) {
		case "type":
			s.Type = v
		case "userId":
			s.UserID = v
		case "anonymousId":
			s.AnonymousID = v
		case "event":
			s.Event = v
		case "name":
			name = v
		case "receivedAt":
			s.ReceivedAt = v
		}
		return nil
	})
	if s.Event == nil {
		s.Event = name
	}
	return s
}

// AppendSummaryString appends raw, a value of a BodySummary, as a JSON string: a string as it
// is (the body is valid JSON), a number (an id) as its text in quotes; it reports false and
// appends nothing for anything else (null, an object...).
func AppendSummaryString(dst, raw []byte) ([]byte, bool) {
	switch {
	case len(raw) >= 2 && raw[0] == '"':
		if raw[1] == '"' {
			return dst, false // ""
		}
		return append(dst, raw...), true
	case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
		dst = append(dst, '"')
		dst = append(dst, raw...)
		return append(dst, '"'), true
	}
	return dst, false
}

// FilterReason is why the router dropped a message for a destination before delivery: the
// reason of a ClassFiltered attempt record (docs/routing.md#filtered-records).
type FilterReason string

// Filter reasons, in the order of the routing rules (docs/routing.md#the-rules-in-order).
const (
	// FilterDuplicate: the router routed a message of the same source and messageId within
	// DEDUPE_WINDOW.
	FilterDuplicate FilterReason = "duplicate"
	// FilterTrackingPlan: a track event the source's tracking plan blocks.
	FilterTrackingPlan FilterReason = "tracking_plan"
	// FilterSuppressed: the message's user is on the suppression list.
	FilterSuppressed FilterReason = "suppressed"
	// FilterIntegrationsOff: the message's integrations object switches the destination off.
	FilterIntegrationsOff FilterReason = "integrations_off"
	// FilterDestinationFilter: one of the destination's filters sampled the message out or
	// dropped it (docs/routing.md#destination-filters).
	FilterDestinationFilter FilterReason = "destination_filter"
)

// FilterReasons returns every FilterReason, in the order of the constants. The caller owns
// the slice.
func FilterReasons() []FilterReason {
	return []FilterReason{FilterDuplicate, FilterTrackingPlan, FilterSuppressed, FilterIntegrationsOff, FilterDestinationFilter}
}

// AppendFilteredRecord appends the webhooks.attempts value of a message the router dropped for
// a destination: a compact AttemptRecord of class ClassFiltered holding only destinationId,
// messageId, errorClass, reason and at (at a FormatTimestamp); DecodeAttemptRecord reads the
// other members as their zero values.
func AppendFilteredRecord(b []byte, destinationID, messageID string, reason FilterReason, at []byte) []byte {
	return appendFilteredRecord(b, destinationID, messageID, reason, "", at)
}

// AppendFilterDropRecord appends the value of a message the destination filter named filter
// sampled out or dropped: AppendFilteredRecord's record of reason FilterDestinationFilter,
// with the member filter after reason.
func AppendFilterDropRecord(b []byte, destinationID, messageID, filter string, at []byte) []byte {
	return appendFilteredRecord(b, destinationID, messageID, FilterDestinationFilter, filter, at)
}

func appendFilteredRecord(b []byte, destinationID, messageID string, reason FilterReason, filter string, at []byte) []byte {
	b = append(b, `{"destinationId":`...)
	b = AppendJSONString(b, destinationID)
	b = append(b, `,"messageId":`...)
	b = AppendJSONString(b, messageID)
	b = append(b, `,"errorClass":"filtered","reason":`...)
	b = AppendJSONString(b, string(reason))
	if filter != "" {
		b = append(b, `,"filter":`...)
		b = AppendJSONString(b, filter)
	}
	b = append(b, `,"at":`...)
	b = AppendJSONString(b, string(at))
	return append(b, '}')
}

// DecodeAttemptRecord decodes one webhooks.attempts value as encoding/json does (keys matched
// case-insensitively, unknown members ignored, a member of the wrong type an error).
func DecodeAttemptRecord(data []byte) (AttemptRecord, error) {
	var r AttemptRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return AttemptRecord{}, fmt.Errorf("attempt record: %w", err)
	}
	return r, nil
}

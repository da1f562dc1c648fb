package schemas

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Retry now (docs/delivery.md#retry-now): a message waiting in a retry tier is sent at once,
// once, and its tier record is then not sent again when it comes due.
//
// The console copies the waiting tier record to webhooks.deliveries with the header
// HeaderRetryNow (the tier record's RetryNowKey). The deliverer that reads that copy writes a
// RetryNowMark under the same key before its POST (RetryNowSending) and after it
// (RetryNowDelivered, RetryNowFailed), or RetryNowSkipped when it does not send it. Every
// deliverer reads TopicRetriedNow whole before it dispatches anything and follows it: a tier
// record whose mark says RetryNowDelivered is finished unsent when it comes due.

const (
	// TopicRetriedNow holds one RetryNowMark per tier record retried now, keyed by its
	// RetryNowKey (docs/topics.md#webhooksretried-now).
	TopicRetriedNow = "webhooks.retried-now"
	// HeaderRetryNow, on a webhooks.deliveries record, makes it the retry-now copy of the tier
	// record its value names (RetryNowKey): sent once, never handed to a tier nor the DLQ, and
	// only while that tier record is not due yet.
	HeaderRetryNow = "retry-now"
)

// The states of a RetryNowMark.
const (
	// RetryNowSending: the retry-now POST is about to start; the tier record, if it comes due
	// meanwhile, waits for the outcome.
	RetryNowSending = "sending"
	// RetryNowDelivered: the retry-now POST delivered the message; its tier record is
	// finished unsent when it comes due.
	RetryNowDelivered = "delivered"
	// RetryNowFailed: the retry-now POST failed; the tier record keeps its schedule.
	RetryNowFailed = "failed"
	// RetryNowSkipped: the retry-now copy was not sent (its tier record comes due too soon,
	// its destination is gone, or it was retried now before); the tier record keeps its
	// schedule.
	RetryNowSkipped = "skipped"
)

// RetryNowMark is the value of one webhooks.retried-now record.
type RetryNowMark struct {
	// State is one of RetryNowSending, RetryNowDelivered, RetryNowFailed, RetryNowSkipped.
	State         string `json:"state"`
	DestinationID string `json:"destinationId"`
	MessageID     string `json:"messageId"`
	// At is when the state was written (FormatTimestamp).
	At string `json:"at"`
	// DueAt is the tier record's due-at: when its tier would attempt it.
	DueAt string `json:"dueAt,omitempty"`
	// Reason says why a retry-now was skipped or failed.
	Reason string `json:"reason,omitempty"`
}

// Record encodes the mark's value.
func (m RetryNowMark) Record() []byte {
	b, _ := json.Marshal(m) // cannot fail: strings only
	return b
}

// DecodeRetryNowMark decodes one webhooks.retried-now value (unknown members ignored).
func DecodeRetryNowMark(data []byte) (RetryNowMark, error) {
	var m RetryNowMark
	if err := json.Unmarshal(data, &m); err != nil {
		return RetryNowMark{}, fmt.Errorf("retry-now mark: %w", err)
	}
	return m, nil
}

// RetryNowKey names a tier record: "<topic>:<partition>:<offset>". It is the value of the
// HeaderRetryNow header and the key of its RetryNowMark.
func RetryNowKey(topic string, partition int32, offset int64) string {
	return topic + ":" + strconv.Itoa(int(partition)) + ":" + strconv.FormatInt(offset, 10)
}

// ParseRetryNowKey reads a RetryNowKey; false when key is none.
func ParseRetryNowKey(key string) (topic string, partition int32, offset int64, ok bool) {
	rest, os, ok1 := cutLast(key)
	topic, ps, ok2 := cutLast(rest)
	p, err1 := strconv.ParseInt(ps, 10, 32)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || topic == "" || p < 0 || o < 0 {
		return "", 0, 0, false
	}
	return topic, int32(p), o, true
}

func cutLast(s string) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

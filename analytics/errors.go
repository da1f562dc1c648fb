package analytics

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

var (
	// ErrClosed is returned by calls, Flush and Close after Close, and is what a Callback's
	// Failure receives for a message still unsent when Close's deadline passed.
	ErrClosed = errors.New("analytics: client is closed")
	// ErrQueueFull is returned by a call when the queue already holds QueueSize messages and
	// BlockWhenFull is false. The message was not queued: nothing is dropped silently.
	ErrQueueFull = errors.New("analytics: queue is full")
	// ErrMessageTooLarge matches (errors.Is) the *ValidationError of a call whose message, as
	// JSON, is larger than MaxMessageBytes; the message was not queued.
	ErrMessageTooLarge = errors.New("analytics: message too large")
)

// ValidationError is returned at once by a call whose message cannot be sent: a required
// field is missing, the timestamp is not ISO 8601, a value cannot be written as JSON, or the
// message is larger than MaxMessageBytes (then Field is empty and errors.Is(err,
// ErrMessageTooLarge) holds).
// Field is the message's JSON field name ("userId", "event", "groupId", "previousId",
// "timestamp", "properties", ...).
type ValidationError struct {
	Type   string // the message type: "identify", "track", ...
	Field  string
	Reason string

	tooLarge bool
}

// Is reports whether the error is the refusal of a message larger than MaxMessageBytes, so
// that errors.Is(err, ErrMessageTooLarge) holds for it.
func (e *ValidationError) Is(target error) bool { return target == ErrMessageTooLarge && e.tooLarge }

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return "analytics: " + e.Type + ": " + e.Reason
	}
	return "analytics: " + e.Type + ": " + e.Field + ": " + e.Reason
}

// ConfigError is returned by every call, Flush and Close when a Client field holds a value
// that cannot work. The fields are checked once, at the first call.
type ConfigError struct {
	Field  string // the Client field, e.g. "FlushAt"
	Reason string
}

func (e *ConfigError) Error() string {
	return "analytics: Client." + e.Field + ": " + e.Reason
}

// HTTPError is the Failure of a message whose batch the server answered with an error status
// (after the retries, for retryable ones).
type HTTPError struct {
	Status int
	// Body is the start of the response body (at most 512 bytes).
	Body string
}

func (e *HTTPError) Error() string {
	if e.Body == "" {
		return "analytics: server answered " + strconv.Itoa(e.Status)
	}
	return "analytics: server answered " + strconv.Itoa(e.Status) + ": " + e.Body
}

// RetryAfterError is a retryable answer that says how long to wait (HTTP 429 or 503 with
// Retry-After). The wait is honoured before the next attempt.
type RetryAfterError struct {
	Err  error
	Wait time.Duration
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %s)", e.Err, e.Wait)
}

func (e *RetryAfterError) Unwrap() error { return e.Err }

// RejectedError is the Failure of a message the server refused on its own while accepting the
// rest of its batch (ingest's "rejected" list): retrying cannot help.
type RejectedError struct {
	Code   string // e.g. "invalid_message"
	Reason string
}

func (e *RejectedError) Error() string {
	return "analytics: message rejected: " + e.Code + ": " + e.Reason
}

// GiveUpError is the Failure of a message whose delivery still failed when the retries ran
// out. Err is the last attempt's error.
type GiveUpError struct {
	Attempts int
	Err      error
}

func (e *GiveUpError) Error() string {
	return fmt.Sprintf("analytics: giving up after %d attempts: %v", e.Attempts, e.Err)
}

func (e *GiveUpError) Unwrap() error { return e.Err }

package deliverer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// Class is the outcome class of one POST: its string is the errorClass of the attempt log. The
// classes, and which are retryable (Class.Retryable), are declared once in schemas
// (schemas.ErrorClass, schemas/attempts.go), which the console reads them from; these are their
// names here. Classify returns no other.
type Class = schemas.ErrorClass

// Outcome classes (schemas.Classes).
const (
	// Success: a 2xx answer.
	Success = schemas.ClassOK
	// Retryable failures: tried again on the next tier.
	Timeout   = schemas.ClassTimeout    // no answer within DELIVERY_TIMEOUT
	ConnError = schemas.ClassConnection // refused, reset, DNS failure...
	Status5xx = schemas.ClassStatus5xx
	Status408 = schemas.ClassStatus408
	Status429 = schemas.ClassStatus429
	// Permanent failures: to the DLQ at once.
	Status4xx      = schemas.ClassStatus4xx // other 4xx, and 1xx/3xx (redirects are not followed)
	TLSError       = schemas.ClassTLS       // certificate refused: no request was sent
	Blocked        = schemas.ClassBlockedAddress
	InvalidURL     = schemas.ClassInvalidURL
	InvalidRequest = schemas.ClassInvalidRequest         // a request net/http refuses as it is: ErrInvalidRequest
	Unavailable    = schemas.ClassDestinationUnavailable // deleted or disabled since routing
	// Not sent, ever: the message's user is suppressed, or was deleted after the message was
	// accepted (docs/delivery.md#deleted-and-suppressed-users), or its body is sealed with a
	// data key that was shredded (docs/security.md#crypto-shredding). The record is finished,
	// not retried nor dead-lettered; its attempt-log line has status 0 and no url.
	Suppressed = schemas.ClassSuppressed
	Deleted    = schemas.ClassDeleted
)

// ErrInvalidRequest is matched (errors.Is) by the error of a request that cannot be sent as it
// is: Classify makes it InvalidRequest.
var ErrInvalidRequest = errors.New("invalid request")

// requestError is a request refused before any connection was attempted, for itself: an
// invalid header (checkRequest), or an error net/http returned before it asked for a
// connection (send). It is ErrInvalidRequest.
type requestError struct{ err error }

func (e *requestError) Error() string        { return "invalid request: " + e.err.Error() }
func (e *requestError) Unwrap() error        { return e.err }
func (e *requestError) Is(target error) bool { return target == ErrInvalidRequest }

// invalidURLError is a webhook URL no request can be made of: Classify makes it InvalidURL.
// It holds the parser's error without the URL, whose query may hold a secret.
type invalidURLError struct{ err error }

func (e *invalidURLError) Error() string { return e.err.Error() }
func (e *invalidURLError) Unwrap() error { return e.err }

// Classify is the one place that decides what an answer (status, header) or a transport error
// means: Success, a retryable class, or a permanent one. retryAfter is the delay a 429 or 503
// asked for through Retry-After (seconds or an HTTP date), or 0.
func Classify(status int, header http.Header, err error, now time.Time) (c Class, retryAfter time.Duration) {
	if err != nil {
		return classifyError(err), 0
	}
	return classifyAnswer(status, header.Get("Retry-After"), now)
}

// classifyAnswer is Classify of an answer, given its Retry-After value ("" when absent): the
// lean HTTP/1.1 client (lean.go) has no http.Header to give.
func classifyAnswer(status int, retryAfter string, now time.Time) (c Class, wait time.Duration) {
	switch {
	case status >= 200 && status < 300:
		return Success, 0
	case status == http.StatusRequestTimeout:
		return Status408, 0
	case status == http.StatusTooManyRequests:
		return Status429, parseRetryAfter(retryAfter, now)
	case status >= 500:
		return Status5xx, parseRetryAfter(retryAfter, now)
	default:
		return Status4xx, 0
	}
}

func classifyError(err error) Class {
	var (
		certErr     *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		invalidErr  x509.CertificateInvalidError
		recordErr   tls.RecordHeaderError
		alertErr    tls.AlertError
		netErr      net.Error
		urlErr      *invalidURLError
	)
	switch {
	case errors.As(err, &urlErr):
		return InvalidURL
	case errors.Is(err, ErrInvalidRequest):
		return InvalidRequest
	case errors.Is(err, ErrBlockedAddress):
		return Blocked
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr),
		errors.As(err, &invalidErr), errors.As(err, &recordErr), errors.As(err, &alertErr):
		return TLSError
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return Timeout
	}
	return ConnError
}

// parseRetryAfter reads Retry-After: delay-seconds or an HTTP date. Invalid or past: 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

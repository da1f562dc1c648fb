package deliverer

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// The attempt log webhooks.attempts and the attempt metrics (docs/delivery.md#attempt-log-and-metrics).

// appendAttemptRecord appends one record of webhooks.attempts, a schemas.AttemptRecord: its
// members in the type's order, "error" on failure only, "pausedForMs" only while the endpoint
// pauses its host, "test" on a test delivery only. It is written by hand (one per POST, on the
// hot path), and writes what encoding/json writes of the type (TestAttemptRecordRoundTrip).
func appendAttemptRecord(b []byte, d *delivery, res *urlResult, lim hostLimit, now time.Time) []byte {
	b = append(b, `{"destinationId":`...)
	b = schemas.AppendJSONString(b, d.destID)
	b = append(b, `,"messageId":`...)
	b = schemas.AppendJSONString(b, d.messageID)
	b = append(b, `,"url":`...)
	b = schemas.AppendJSONString(b, schemas.RedactURL(res.URL)) // no credentials in the log
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(d.attempt), 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(res.Status), 10)
	b = append(b, `,"latencyMs":`...)
	b = strconv.AppendFloat(b, float64(res.Latency.Microseconds())/1000, 'f', -1, 64)
	b = append(b, `,"errorClass":`...)
	b = schemas.AppendJSONString(b, string(res.Class))
	if res.Class != Success {
		b = append(b, `,"error":`...)
		b = schemas.AppendJSONString(b, describe(res))
	}
	b = append(b, `,"concurrencyLimit":`...)
	b = strconv.AppendInt(b, int64(lim.limit), 10)
	if lim.paused > 0 {
		b = append(b, `,"pausedForMs":`...)
		b = strconv.AppendInt(b, lim.paused.Milliseconds(), 10)
	}
	if d.test {
		b = append(b, `,"test":true`...)
	}
	b = append(b, `,"at":"`...)
	b = schemas.AppendTimestamp(b, now)
	return append(b, `"}`...)
}

func (s *Service) logAttempt(d delivery, res *urlResult, lim hostLimit, now time.Time) {
	dm := s.metrics.forDestination(d.destID)
	dm.attempts(statusClass(res)).Inc()
	dm.latency.Observe(res.Latency.Seconds())
	if lim.limit > 0 { // 0: a test delivery to a host no delivery has used yet
		dm.limit.Set(float64(lim.limit))
	}
	v := appendAttemptRecord(make([]byte, 0, 288), &d, res, lim, now)
	s.cl.Produce(s.grace, &kgo.Record{Topic: s.cfg.AttemptsTopic, Key: []byte(d.destID), Value: v}, nil)
}

// statusClass is the status label of the attempts metric: 2xx, 4xx, 5xx, or the error class.
func statusClass(res *urlResult) string {
	if res.Status > 0 {
		return strconv.Itoa(res.Status/100) + "xx"
	}
	return string(res.Class)
}

// describe is the last-error text of a result; it never holds the URL's query (secrets).
func describe(res *urlResult) string {
	if res.Err != nil {
		var ue interface{ Unwrap() error }
		err := res.Err
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			err = ue.Unwrap() // *url.Error repeats the URL
		}
		return string(res.Class) + ": " + err.Error()
	}
	return fmt.Sprintf("%s: HTTP %d from %s", res.Class, res.Status, res.Host)
}

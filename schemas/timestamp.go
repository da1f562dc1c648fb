package schemas

import (
	"fmt"
	"time"
)

// ParseTimestamp reads an ISO 8601 / RFC 3339 date-time as clients send it: "Z" or a
// "±hh:mm" offset, or "±hhmm" without the colon (older clients), with 0 to 9 fractional
// digits of seconds. The result is in UTC.
func ParseTimestamp(s string) (time.Time, error) {
	if len(s) > 19 && s[19] == '.' { // at most 9 fractional digits
		n := 20
		for n < len(s) && s[n] >= '0' && s[n] <= '9' {
			n++
		}
		if n-20 > 9 {
			return time.Time{}, fmt.Errorf("%q has more than 9 fractional digits", s)
		}
	}
	// The layout with a colon-less offset is tried only when the string ends in one, so the
	// common forms cost one parse.
	if n := len(s); n > 5 && (s[n-5] == '+' || s[n-5] == '-') && isDigits(s[n-4:]) {
		if t, err := time.Parse("2006-01-02T15:04:05.999999999-0700", s); err == nil {
			return t.UTC(), nil
		}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an ISO 8601 date-time such as 2026-01-02T15:04:05.123Z", s)
	}
	return t.UTC(), nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// FormatTimestamp renders t as the delivered timestamp form YYYY-MM-DDTHH:MM:SS.mmmZ in UTC.
func FormatTimestamp(t time.Time) string {
	return string(AppendTimestamp(make([]byte, 0, 24), t))
}

// AppendTimestamp appends t in the form of FormatTimestamp, without allocating.
func AppendTimestamp(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	hour, minute, sec := t.Clock()
	ms := t.Nanosecond() / int(time.Millisecond)
	if year < 0 || year > 9999 { // outside what four digits show: let the time package write it
		return append(dst, t.Format("2006-01-02T15:04:05.000Z07:00")...)
	}
	dst = appendInt(dst, year, 4)
	dst = append(dst, '-')
	dst = appendInt(dst, int(month), 2)
	dst = append(dst, '-')
	dst = appendInt(dst, day, 2)
	dst = append(dst, 'T')
	dst = appendInt(dst, hour, 2)
	dst = append(dst, ':')
	dst = appendInt(dst, minute, 2)
	dst = append(dst, ':')
	dst = appendInt(dst, sec, 2)
	dst = append(dst, '.')
	dst = appendInt(dst, ms, 3)
	return append(dst, 'Z')
}

func appendInt(dst []byte, v, width int) []byte {
	var buf [8]byte
	i := len(buf)
	for w := 0; w < width || v > 0; w++ {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, buf[i:]...)
}

package schemas

import "testing"

// TestSummarizeBody: what an attempt record says of a delivery body, read with the member
// scanner: the raw values of type, userId, anonymousId, event (else name) and receivedAt, a
// number id kept as its text, nothing read past properties (a canonical body names them before).
func TestSummarizeBody(t *testing.T) {
	str := func(dst []byte, raw []byte) string {
		b, ok := AppendSummaryString(dst, raw)
		if !ok {
			return "-"
		}
		return string(b)
	}
	for _, c := range []struct {
		name, body                         string
		typ, user, anon, event, receivedAt string
	}{
		{"track", `{"version":1,"type":"track","messageId":"m","userId":"u-1","anonymousId":"a\"1","event":"Order Completed","receivedAt":"2026-01-02T03:04:05.000Z","properties":{"userId":"x"}}`,
			`"track"`, `"u-1"`, `"a\"1"`, `"Order Completed"`, `"2026-01-02T03:04:05.000Z"`},
		{"page: its name", `{"type":"page","anonymousId":42,"name":"Pricing","properties":{}}`, `"page"`, "-", `"42"`, `"Pricing"`, "-"},
		{"identify: null and empty ids", `{"type":"identify","userId":null,"anonymousId":"","traits":{"name":"x"}}`, `"identify"`, "-", "-", "-", "-"},
		{"nothing read past properties", `{"type":"track","properties":{},"userId":"late"}`, `"track"`, "-", "-", "-", "-"},
		{"not an object", `[1,2]`, "-", "-", "-", "-", "-"},
		{"sealed bytes", "\x01\x02\x03", "-", "-", "-", "-", "-"},
	} {
		s := SummarizeBody([]byte(c.body))
		got := [5]string{str(nil, s.Type), str(nil, s.UserID), str(nil, s.AnonymousID), str(nil, s.Event), str(nil, s.ReceivedAt)}
		want := [5]string{c.typ, c.user, c.anon, c.event, c.receivedAt}
		if got != want {
			t.Errorf("%s: %q, want %q", c.name, got, want)
		}
	}
}

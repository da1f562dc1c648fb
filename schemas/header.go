package schemas

import (
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Values that become HTTP headers of a delivered webhook (docs/receivers.md#headers): the
// messageId (X-Message-Id, and webhook-id with Standard Webhooks) and a webhook entry's static
// headers. A value no HTTP request may carry can never be delivered, so it is refused where it
// enters: ingest refuses such a messageId (Message.Validate), the config refuses such a header
// (Config.Validate), and the deliverer refuses both before it takes a host slot
// (docs/security.md#what-cannot-become-a-header).

// Limits of a webhook entry (docs/configuration.md#webhook). Servers refuse a request line
// or a header line longer than about 8 KB (nginx's and Apache's defaults), so a URL or a value
// past these could not be delivered anyway.
const (
	// MaxWebhookURLBytes is the longest webhook URL, in bytes.
	MaxWebhookURLBytes = 8 << 10
	// MaxWebhookHeaders is the most static headers one webhook entry may have.
	MaxWebhookHeaders = 20
	// MaxHeaderNameBytes is the longest static header name, in bytes.
	MaxHeaderNameBytes = 256
	// MaxHeaderValueBytes is the longest static header value, in bytes.
	MaxHeaderValueBytes = 8 << 10
)

// CheckMessageID returns why id cannot be a message's messageId, or nil. It becomes the
// X-Message-Id header (and webhook-id) of every webhook, so it may hold no control character
// (U+0000–U+001F, U+007F: CR and LF would split the request, and Go's HTTP client refuses the
// others), and may not begin or end with a space: HTTP drops those, so the receiver would see
// another id than the one signed by Standard Webhooks and remembered for de-duplication.
// "" (absent: ingest generates one) is valid.
func CheckMessageID(id string) error {
	if i := strings.IndexFunc(id, isControl); i >= 0 {
		return fmt.Errorf("must not contain control characters (found U+%04X at byte %d): it is sent as the %s header of every webhook", id[i], i, HeaderXMessageID)
	}
	if id != strings.Trim(id, " ") {
		return fmt.Errorf("must not begin or end with a space: it is sent as the %s header of every webhook, where HTTP drops them", HeaderXMessageID)
	}
	return nil
}

func isControl(r rune) bool { return r < ' ' || r == 0x7f }

// ValidHeaderName reports whether name is an HTTP header field name (a token, RFC 9110
// §5.6.2).
func ValidHeaderName(name string) bool { return httpguts.ValidHeaderFieldName(name) }

// ValidHeaderValue reports whether value may be an HTTP header field value: no control
// characters but tab (RFC 9110 §5.5). It is the rule Go's HTTP client applies before it sends
// a request.
func ValidHeaderValue(value string) bool { return httpguts.ValidHeaderFieldValue(value) }

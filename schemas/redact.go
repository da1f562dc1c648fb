package schemas

import (
	"net/url"
	"slices"
	"strings"
)

// redacted replaces a secret wherever a URL is shown.
const redacted = "xxxxx"

// RedactURL is raw as it may be logged, stored or exported: a user name and password become
// xxxxx, every query value becomes xxxxx (the keys stay, so "?token=xxxxx" still says what was
// configured; a query part without "=", often a bare token, becomes xxxxx=xxxxx), and a
// fragment is dropped. Webhook URLs often carry credentials in either
// place; the attempt log, the DLQ, the logs and the metrics show only this. A URL that does
// not parse is shown as its scheme and host at most.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if scheme, rest, ok := strings.Cut(raw, "://"); ok {
			host, _, _ := strings.Cut(rest, "/")
			if _, h, ok := strings.Cut(host, "@"); ok {
				host = redacted + "@" + h
			}
			return scheme + "://" + host + "/" + redacted
		}
		return redacted
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(redacted, redacted)
		} else {
			u.User = url.User(redacted)
		}
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			if p != "" && !strings.Contains(p, "=") {
				parts[i] = redacted // a bare token: its "key" is the secret
			}
		}
		u.RawQuery = strings.Join(parts, "&")
		q := u.Query()
		for k, vs := range q {
			for i := range vs {
				vs[i] = redacted
			}
			q[k] = vs
		}
		u.RawQuery = q.Encode()
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// Mask stands for the hidden part of a secret where the console shows one (docs/console.md#secrets):
// MaskSecret and MaskURL put it in place of the secret. A value holding it is a masked value,
// never a real one, to the console's API (IsMasked).
const Mask = "••••"

// maskTail is the length from which a masked secret shows its last two characters.
const maskTail = 16

// authSchemes are the authorization schemes MaskSecret keeps in clear ("Bearer ••••88").
var authSchemes = []string{"basic", "bearer", "bot", "digest", "token", "apikey", "key", "sso-key", "oauth"}

// MaskSecret is how the console shows a secret, a static header value above all: the mask,
// after an authorization scheme such as "Bearer " when the value starts with one, and followed
// by the value's last two characters when the secret is at least 16 characters long — enough
// to tell two tokens apart, never enough to guess one. An empty value stays empty.
func MaskSecret(v string) string {
	if v == "" {
		return ""
	}
	prefix, rest := "", v
	if scheme, token, ok := strings.Cut(v, " "); ok && token != "" && slices.Contains(authSchemes, strings.ToLower(scheme)) {
		prefix, rest = scheme+" ", token
	}
	if r := []rune(rest); len(r) >= maskTail {
		return prefix + Mask + string(r[len(r)-2:])
	}
	return prefix + Mask
}

// MaskURL is how the console shows a webhook URL: as RedactURL, with Mask for the user name,
// the password and every query value (a query part without "=" is masked whole), keeping the
// order of the query; a fragment is then dropped. A URL with neither user info nor a query is
// shown as it is; one that does not parse is RedactURL's form.
func MaskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return RedactURL(raw)
	}
	if u.User == nil && u.RawQuery == "" {
		return raw
	}
	var b strings.Builder
	b.WriteString(u.Scheme + "://")
	if u.User != nil {
		b.WriteString(Mask)
		if _, ok := u.User.Password(); ok {
			b.WriteString(":" + Mask)
		}
		b.WriteString("@")
	}
	b.WriteString(u.Host + u.EscapedPath())
	if u.RawQuery != "" {
		b.WriteString("?")
		for i, part := range strings.Split(u.RawQuery, "&") {
			if i > 0 {
				b.WriteString("&")
			}
			if key, _, ok := strings.Cut(part, "="); ok {
				b.WriteString(key + "=" + Mask)
			} else if part != "" {
				b.WriteString(Mask)
			}
		}
	}
	return b.String()
}

// IsMasked reports whether v holds the mask: a value the console showed, sent back.
func IsMasked(v string) bool { return strings.Contains(v, Mask) }

// URLHasCredentials reports whether a webhook URL may carry a credential: user info or a
// query (RedactURL hides both). Such a URL is a secret at rest (secretbox.go).
func URLHasCredentials(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.User != nil || u.RawQuery != "")
}

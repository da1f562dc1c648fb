package schemas

import (
	"net/url"
	"strings"
)

// redacted replaces a secret wherever a URL is shown.
const redacted = "xxxxx"

// RedactURL is raw as it may be logged, stored or exported: a user name and password become
// xxxxx, every query value becomes xxxxx (the keys stay, so "?token=xxxxx" still says what was
// configured), and a fragment is dropped. Webhook URLs often carry credentials in either
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

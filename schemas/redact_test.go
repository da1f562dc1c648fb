package schemas

import (
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://hooks.example.com/segment":                        "https://hooks.example.com/segment",
		"https://user:s3cret@hooks.example.com/in":                 "https://xxxxx:xxxxx@hooks.example.com/in",
		"https://apikey@hooks.example.com/in":                      "https://xxxxx@hooks.example.com/in",
		"https://hooks.example.com/in?token=abc123&src=tributary":  "https://hooks.example.com/in?src=xxxxx&token=xxxxx",
		"https://hooks.example.com/in?token=a&token=b#frag-secret": "https://hooks.example.com/in?token=xxxxx&token=xxxxx",
		"http://u:p@[::1]:8080/x?sig=1":                            "http://xxxxx:xxxxx@[::1]:8080/x?sig=xxxxx",
		"https://hooks.example.com/in?s3cret&src=1":                "https://hooks.example.com/in?src=xxxxx&xxxxx=xxxxx", // a bare token
		"https://user:s3cret@hooks.example.com/%zz?token=abc":      "https://xxxxx@hooks.example.com/xxxxx",              // does not parse
	} {
		got := RedactURL(raw)
		if strings.Contains(got, "s3cret") || strings.Contains(got, "abc") {
			t.Errorf("RedactURL(%q) = %q shows a secret", raw, got)
		}
		if got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
	}
}

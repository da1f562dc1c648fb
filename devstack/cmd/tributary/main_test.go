package main

import (
	"strings"
	"testing"
)

type fakeConsole struct {
	token     string
	generated bool
}

func (f fakeConsole) ConsoleAddr() string                          { return "127.0.0.1:8090" }
func (f fakeConsole) ConsoleToken() (token string, generated bool) { return f.token, f.generated }

// TestConsoleBannerHidesToken: make run's start-up banner, written to stderr where logs are
// collected, gives the console's URL and the file that holds the token, never the token.
func TestConsoleBannerHidesToken(t *testing.T) {
	const token = "ct_4be0c1f2d5a6e7b8c9d0a1b2c3d4e5f6a7b8c9d0e1f2a3b4"
	for _, generated := range []bool{true, false} {
		var b strings.Builder
		printConsoleBanner(&b, fakeConsole{token: token, generated: generated}, ".data")
		out := b.String()
		if strings.Contains(out, token) {
			t.Errorf("generated %v: the banner shows the token: %s", generated, out)
		}
		if !strings.Contains(out, "http://127.0.0.1:8090") {
			t.Errorf("generated %v: no URL: %s", generated, out)
		}
		if generated && !strings.Contains(out, ".data/console-token") {
			t.Errorf("the banner does not say where the generated token is: %s", out)
		}
	}
}

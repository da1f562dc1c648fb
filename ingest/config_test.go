package ingest

import (
	"net/netip"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestConfigFromEnviron: every bad value, unparsable or unusable, is an error naming its
// variable, and several are all reported.
func TestConfigFromEnviron(t *testing.T) {
	servicetest.Settings[Config]{
		FromEnviron: ConfigFromEnviron,
		Default:     DefaultConfig(),
		Every: map[string]string{
			"INGEST_ADDR":            ":9",
			"INGEST_TRUSTED_PROXIES": "10.0.0.0/8, 192.168.1.7 ,",
			"INGEST_PRODUCE_TIMEOUT": "2s",
			"INGEST_ALLOWED_ORIGINS": "https://a.example, https://*.b.example,http://localhost:3000",
			"INGEST_PUBLIC_URL":      "https://track.example.com",
			"INGEST_ALLOWED_HOSTS":   "track.example.com, *.track.example.com",
			"INGEST_DISABLE_INBOUND": "true",
			"INGEST_MAX_IN_FLIGHT":   "0",
			"SHUTDOWN_TIMEOUT":       "3s",

			"INGEST_MAX_IN_FLIGHT_PER_PRIVATE_IP": "100",
		},
		Want: func(c *Config) {
			c.Addr, c.ProduceTimeout, c.DisableInbound, c.MaxInFlight, c.ShutdownTimeout = ":9", 2*time.Second, true, 0, 3*time.Second
			c.MaxInFlightPerPrivateIP = 100
			c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32")}
			c.AllowedOrigins = []string{"https://a.example", "https://*.b.example", "http://localhost:3000"}
			c.PublicURL = "https://track.example.com"
			c.AllowedHosts = []string{"track.example.com", "*.track.example.com"}
		},
		Bad: map[string][]string{
			"INGEST_TRUSTED_PROXIES": {"10.0.0.0/8,nope"},
			"INGEST_ALLOWED_ORIGINS": {"app.example.com", "https://a.example/path", "https://a.example?x=1"},
			"INGEST_ALLOWED_HOSTS":   {"https://track.example.com", "track.example.com:443", "*track.example.com"},
			"INGEST_PUBLIC_URL":      {"track.example.com", "ftp://track.example.com", "https://track.example.com/?a=1", "https://user@track.example.com"},
			"INGEST_PRODUCE_TIMEOUT": {"0s", "-1s", "soon"},
			"INGEST_DISABLE_INBOUND": {"maybe"},
			"INGEST_MAX_IN_FLIGHT":   {"-1", "many"},
			"SHUTDOWN_TIMEOUT":       {"0s", "x"},

			"INGEST_MAX_IN_FLIGHT_PER_PRIVATE_IP": {"-1", "lots"},
		},
		Unusable:      func(c *Config) { c.Addr, c.ProduceTimeout, c.MaxInFlight, c.ShutdownTimeout = "", 0, -1, 0 },
		Validate:      (*Config).Validate,
		UnusableNamed: []string{"INGEST_ADDR", "INGEST_PRODUCE_TIMEOUT", "INGEST_MAX_IN_FLIGHT", "SHUTDOWN_TIMEOUT"},
	}.Run(t)
}

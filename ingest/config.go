package ingest

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Config is the ingest service's configuration. Start from DefaultConfig; ConfigFromEnv
// applies the environment (the fields tagged env; docs/configuration.md#run-time-settings).
type Config struct {
	// Addr is the HTTP listen address (INGEST_ADDR).
	Addr string `env:"INGEST_ADDR" doc:"listen address of the tracking API (and of '/healthz', '/readyz', and '/metrics' unless 'METRICS_ADDR' is set); ':8080' for every interface (the images set '0.0.0.0:8080')"`
	// TrustedProxies are the peers whose X-Forwarded-For is believed (INGEST_TRUSTED_PROXIES,
	// comma-separated CIDRs or addresses). Empty: context.ip is always the TCP peer.
	TrustedProxies []netip.Prefix `env:"INGEST_TRUSTED_PROXIES" doc:"comma-separated CIDRs or addresses of the proxies whose 'X-Forwarded-For' is believed; empty: 'context.ip' is always the TCP peer"`
	// ProduceTimeout bounds how long a request waits for Kafka's acknowledgement before it
	// answers 503 (INGEST_PRODUCE_TIMEOUT).
	ProduceTimeout time.Duration `env:"INGEST_PRODUCE_TIMEOUT" doc:"how long a request waits for the acknowledgement of Kafka before it is answered 503"`
	// Topic names; tests on a shared broker override them.
	EventsTopic, RejectedTopic, InboundTopic string
	// InboundGroup is the consumer group of the tracking.inbound front door.
	InboundGroup string
	// DisableInbound turns the Kafka front door off (INGEST_DISABLE_INBOUND).
	DisableInbound bool `env:"INGEST_DISABLE_INBOUND" doc:"turn off the 'tracking.inbound' Kafka front door"`
	// MaxInFlight bounds the requests served at once (INGEST_MAX_IN_FLIGHT); a request beyond
	// it is answered 503 with Retry-After at once, so an overload sheds load instead of queueing
	// memory. 0: no bound.
	MaxInFlight int `env:"INGEST_MAX_IN_FLIGHT" doc:"requests served at once; one more is answered 503 'overloaded' with 'Retry-After' at once; 0: no bound. Requests whose write key is only in the body share an eighth of it"`
	// MaxInFlightPerIP bounds the requests of one client address at once
	// (INGEST_MAX_IN_FLIGHT_PER_IP): one more is answered 429 with Retry-After. 0: no bound.
	// Without TrustedProxies it applies to public peers only (a private peer is most likely a
	// load balancer relaying everyone).
	MaxInFlightPerIP int `env:"INGEST_MAX_IN_FLIGHT_PER_IP" doc:"requests of one client address ('context.ip') served at once; one more is answered 429 'too_many_requests' with 'Retry-After'; 0: no bound. Without 'INGEST_TRUSTED_PROXIES' it bounds public peers only: a private or loopback peer gets 'INGEST_MAX_IN_FLIGHT_PER_PRIVATE_IP'"`
	// MaxInFlightPerPrivateIP bounds the requests of one private or loopback peer at once when
	// TrustedProxies is empty (INGEST_MAX_IN_FLIGHT_PER_PRIVATE_IP): such a peer is most likely
	// a load balancer relaying every client, so its bound is larger than MaxInFlightPerIP, but
	// never more than three quarters of MaxInFlight, so that one private peer's slow bodies
	// cannot take every slot (docs/ingest.md#behind-a-load-balancer). 0: no bound of its own
	// (three quarters of MaxInFlight still applies).
	MaxInFlightPerPrivateIP int `env:"INGEST_MAX_IN_FLIGHT_PER_PRIVATE_IP" doc:"without 'INGEST_TRUSTED_PROXIES': requests of one private or loopback peer (most likely your load balancer) served at once, never more than three quarters of 'INGEST_MAX_IN_FLIGHT'; one more is answered 429 'too_many_requests'; 0: only that three-quarter share. Behind a proxy, set 'INGEST_TRUSTED_PROXIES' instead: then every client gets 'INGEST_MAX_IN_FLIGHT_PER_IP'"`
	// AllowedOrigins for CORS (INGEST_ALLOWED_ORIGINS, comma-separated): exact origins, or
	// "https://*.example.com" for the subdomains of a host. Empty allows every origin, as
	// Segment's API does, with "Access-Control-Allow-Origin: *" and no credentials; with a list,
	// a browser request from another origin is refused (docs/ingest.md#cors).
	AllowedOrigins []string `env:"INGEST_ALLOWED_ORIGINS" doc:"comma-separated origins browsers may call from ('https://app.example.com', 'https://*.example.com'); a request from any other 'Origin' is refused 403; empty: every origin"`
	// AllowedHosts are the host names the tracking API answers to (INGEST_ALLOWED_HOSTS,
	// comma-separated; docs/security.md#dns-rebinding); others get 421. Empty: the loopback
	// names when INGEST_ADDR is on loopback, any name otherwise.
	AllowedHosts []string `env:"INGEST_ALLOWED_HOSTS" doc:"comma-separated host names the tracking API answers to ('track.example.com', '*.example.com', an IP address; '*': any): a request with another 'Host' is answered 421, '/healthz', '/readyz' and '/metrics' excepted; 'localhost', '127.0.0.1' and '[::1]' are always accepted. Empty: only those when 'INGEST_ADDR' is on loopback, any name otherwise ([security.md](security.md#dns-rebinding))"`
	// PublicURL is the address browsers reach this ingest at (INGEST_PUBLIC_URL), served to
	// analytics.js in /v1/projects/{writeKey}/settings as where to post. Empty: the address of
	// each settings request itself.
	PublicURL string `env:"INGEST_PUBLIC_URL" doc:"the URL browsers reach the tracking API at ('https://track.example.com'), which analytics.js is told to post to; empty: the host each settings request was sent to"`
	// ShutdownTimeout bounds the stop after SIGTERM (SHUTDOWN_TIMEOUT): requests in flight and
	// the front door's batch finish, the producer flushes; what is left by then is answered 503
	// or left uncommitted, to be read again.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT"`
}

// DefaultConfig returns the defaults of docs/ingest.md.
func DefaultConfig() Config {
	return Config{
		Addr:             "127.0.0.1:8080",
		ProduceTimeout:   5 * time.Second,
		EventsTopic:      schemas.TopicEvents,
		RejectedTopic:    schemas.TopicRejected,
		InboundTopic:     schemas.TopicInbound,
		InboundGroup:     "tributary-ingest-inbound",
		MaxInFlight:      1024,
		MaxInFlightPerIP: 256,
		// Three quarters of MaxInFlight: a quarter of the slots stays for the other peers.
		MaxInFlightPerPrivateIP: 768,
		ShutdownTimeout:         platform.DefaultShutdownGrace,
	}
}

// ConfigFromEnv returns DefaultConfig with the process environment applied
// (platform.LoadSettings: an unset or empty variable keeps the default), validated: the error
// lists every variable that does not parse or cannot work.
func ConfigFromEnv() (Config, error) { return ConfigFromEnviron(nil) }

// ConfigFromEnviron is ConfigFromEnv reading environ (variable name to value) instead of the
// process environment; nil reads the process environment.
func ConfigFromEnviron(environ map[string]string) (Config, error) {
	return platform.LoadSettings(DefaultConfig(), environ, platform.ParseWith(ParseTrustedProxies))
}

// ParseTrustedProxies reads a comma-separated list of CIDRs or single addresses.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if p, err := netip.ParsePrefix(part); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("INGEST_TRUSTED_PROXIES: %q is neither a CIDR nor an address", part)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Validate returns every unusable field, each naming its variable.
func (c *Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("INGEST_ADDR: required"))
	}
	if c.MaxInFlight < 0 || c.MaxInFlightPerIP < 0 || c.MaxInFlightPerPrivateIP < 0 {
		errs = append(errs, fmt.Errorf("INGEST_MAX_IN_FLIGHT, INGEST_MAX_IN_FLIGHT_PER_IP, INGEST_MAX_IN_FLIGHT_PER_PRIVATE_IP: must be 0 (no bound) or more, got %d, %d and %d",
			c.MaxInFlight, c.MaxInFlightPerIP, c.MaxInFlightPerPrivateIP))
	}
	if c.ProduceTimeout <= 0 {
		errs = append(errs, fmt.Errorf("INGEST_PRODUCE_TIMEOUT: must be positive, got %s", c.ProduceTimeout))
	}
	if c.EventsTopic == "" || c.RejectedTopic == "" || c.InboundTopic == "" {
		errs = append(errs, errors.New("ingest topics: names must not be empty"))
	}
	if !c.DisableInbound && c.InboundGroup == "" {
		errs = append(errs, errors.New("ingest inbound group: required"))
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("INGEST_MAX_IN_FLIGHT: must not be negative, got %d", c.MaxInFlight))
	}
	for _, o := range c.AllowedOrigins {
		if !validOrigin(o) {
			errs = append(errs, fmt.Errorf("INGEST_ALLOWED_ORIGINS: %q is not an origin (scheme://host[:port], or scheme://*.host)", o))
		}
	}
	if err := platform.ValidateAllowedHosts("INGEST_ALLOWED_HOSTS", c.AllowedHosts); err != nil {
		errs = append(errs, err)
	}
	if _, ok := parsePublicURL(c.PublicURL); c.PublicURL != "" && !ok {
		errs = append(errs, fmt.Errorf("INGEST_PUBLIC_URL: %q is not an absolute http or https URL without query", c.PublicURL))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SHUTDOWN_TIMEOUT: must be positive, got %s", c.ShutdownTimeout))
	}
	return errors.Join(errs...)
}

// privatePeerBound is the bound of one private or loopback peer without trusted proxies:
// MaxInFlightPerPrivateIP, at most three quarters of MaxInFlight (so a quarter of the slots is
// always left to the other peers); 0: no bound.
func (c *Config) privatePeerBound() int {
	n := c.MaxInFlightPerPrivateIP
	if c.MaxInFlight > 0 {
		share := max(1, c.MaxInFlight-c.MaxInFlight/4)
		if n == 0 || n > share {
			n = share
		}
	}
	return n
}

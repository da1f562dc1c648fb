package ingest

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// envSettings are the environment variables of cmd/ingest (docs/ingest.md).
type envSettings struct {
	Addr           string        `env:"INGEST_ADDR" envDefault:"127.0.0.1:8080"`
	TrustedProxies string        `env:"INGEST_TRUSTED_PROXIES"`
	ProduceTimeout time.Duration `env:"INGEST_PRODUCE_TIMEOUT" envDefault:"5s"`
	AllowedOrigins []string      `env:"INGEST_ALLOWED_ORIGINS" envSeparator:","`
	DisableInbound bool          `env:"INGEST_DISABLE_INBOUND"`
	MaxInFlight    int           `env:"INGEST_MAX_IN_FLIGHT" envDefault:"1024"`
	Shutdown       time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"10s"`
}

// ConfigFromEnv reads Config from the environment: INGEST_ADDR, INGEST_TRUSTED_PROXIES
// (comma-separated CIDRs or addresses), INGEST_PRODUCE_TIMEOUT, INGEST_ALLOWED_ORIGINS,
// INGEST_DISABLE_INBOUND, INGEST_MAX_IN_FLIGHT.
func ConfigFromEnv() (Config, error) {
	e, err := env.ParseAs[envSettings]()
	if err != nil {
		return Config{}, fmt.Errorf("reading ingest settings: %w", err)
	}
	cfg := DefaultConfig()
	cfg.Addr, cfg.ProduceTimeout, cfg.AllowedOrigins, cfg.DisableInbound = e.Addr, e.ProduceTimeout, e.AllowedOrigins, e.DisableInbound
	cfg.MaxInFlight, cfg.ShutdownTimeout = e.MaxInFlight, e.Shutdown
	if cfg.TrustedProxies, err = ParseTrustedProxies(e.TrustedProxies); err != nil {
		return Config{}, err
	}
	return cfg, cfg.Validate()
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

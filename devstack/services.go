package devstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tributary-cdp/tributary/audiences"
	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/deliverer"
	"github.com/tributary-cdp/tributary/ingest"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/router"
)

// addServices builds every service that exists and adds it to the stack's runners. Each service
// that is added is added here, built through its library New from its own Config (read by its
// own ConfigFromEnviron in ConfigFromEnv) exactly as its own main does, on the dependencies
// they share (platform.Deps, docs/architecture.md#how-a-service-is-wired), built once.
func (s *Stack) addServices(ctx context.Context) error {
	defer endBuild(ctx)
	// One health for the whole process, served on /healthz and /readyz by ingest, the profile
	// API and the console: it says what every service reports — its Kafka check, named after it
	// ("deliverer kafka": Health.Scope), the router's pipes replacing a failed Kafka session, the
	// audiences state restoring, the console's views catching up.
	health := platform.NewHealth()
	if err := s.reg.Register(platform.ReadyGauge(health)); err != nil {
		return err
	}
	// One keyring of the data keys for the five services (docs/security.md#crypto-shredding):
	// one reader of tributary.keys and one copy of the keys in memory, not five.
	keys, err := shred.New(shred.Config{Kafka: s.cfg.Kafka, Logger: s.logger})
	if err != nil {
		return err
	}
	s.services = append(s.services, labelled{"keyring", keys})
	shared := platform.Deps{Kafka: s.cfg.Kafka, Logger: s.logger, Registerer: s.reg, Gatherer: s.reg}
	for _, svc := range []struct {
		name  string
		build func(platform.Deps, *shred.Keyring) (platform.Runner, error)
	}{
		{"ingest", s.buildIngest},
		{"router", s.buildRouter},
		{"deliverer", s.buildDeliverer},
		{"audiences", s.buildAudiences},
		{"console", s.buildConsole},
	} {
		deps := shared
		deps.Health = health.Scope(svc.name)
		if deps.Tracer, err = s.tracer(svc.name); err != nil {
			return err
		}
		buildAs(ctx, svc.name)
		r, err := svc.build(deps, keys)
		if err != nil {
			return err
		}
		s.services = append(s.services, labelled{svc.name, r})
	}
	return nil
}

// tracer builds the Tracer of one service (nil: span export off, docs/operations.md#tracing)
// and adds it to the stack's runners, so that its last spans are exported at the stop. In one
// process each service keeps a service.name of its own.
func (s *Stack) tracer(service string) (*platform.Tracer, error) {
	if service == "console" || !s.cfg.Tracing.Enabled() {
		return nil, nil
	}
	name := platform.DefaultServiceName(service)
	if s.cfg.Tracing.ServiceName != "" {
		name = s.cfg.Tracing.ServiceName + "-" + service
	}
	t, err := platform.NewTracer(s.cfg.Tracing, name)
	if err != nil {
		return nil, err
	}
	s.services = append(s.services, labelled{service + " tracer", t})
	return t, nil
}

// buildIngest builds ingest and opens its listener (its address is IngestAddr).
func (s *Stack) buildIngest(deps platform.Deps, keys *shred.Keyring) (platform.Runner, error) {
	icfg := s.cfg.Ingest // ConfigFromEnv read it as the ingest command does
	in, err := ingest.New(icfg, ingest.Deps{
		Deps:        deps,
		Keys:        keys,
		Sources:     func() ingest.Sources { return s.store.Snapshot() },
		ConfigReady: s.store.Ready(),
	})
	if err != nil {
		return nil, fmt.Errorf("building ingest: %w", err)
	}
	if err := in.Listen(); err != nil {
		return nil, fmt.Errorf("ingest: listening on %s (INGEST_ADDR): %w", icfg.Addr, err)
	}
	s.ingestAddr = in.Addr()
	return in, nil
}

func (s *Stack) buildRouter(deps platform.Deps, keys *shred.Keyring) (platform.Runner, error) {
	rt, err := router.New(s.cfg.Router, router.Deps{
		Deps:        deps,
		Keys:        keys,
		Config:      func() router.Snapshot { return s.store.Snapshot() },
		ConfigReady: s.store.Ready(),
	})
	if err != nil {
		return nil, fmt.Errorf("building router: %w", err)
	}
	return rt, nil
}

func (s *Stack) buildDeliverer(deps platform.Deps, keys *shred.Keyring) (platform.Runner, error) {
	dl, err := deliverer.New(s.cfg.Deliverer, deliverer.Deps{
		Deps:        deps,
		Keys:        keys,
		Config:      func() deliverer.Destinations { return s.store.Snapshot() },
		ConfigReady: s.store.Ready(),
	})
	if err != nil {
		return nil, fmt.Errorf("building deliverer: %w", err)
	}
	return dl, nil
}

// buildAudiences builds the audiences service, with a token of its own when AUDIENCES_TOKEN is
// empty, and opens the profile API's listener (AudiencesAddr).
func (s *Stack) buildAudiences(deps platform.Deps, keys *shred.Keyring) (platform.Runner, error) {
	acfg := s.cfg.Audiences
	if acfg.Token == "" {
		// The profile API holds personal data: make run asks for a token too, its own, which
		// it gives the console (docs/audiences.md#profile-api).
		var err error
		if acfg.Token, err = dataDirToken(s.cfg.DataDir, audiencesTokenFile, "at_"); err != nil {
			return nil, fmt.Errorf("audiences token: %w", err)
		}
	}
	s.audiencesToken = acfg.Token
	au, err := audiences.New(acfg, audiences.Deps{
		Deps:        deps,
		Keys:        keys,
		Config:      func() audiences.Snapshot { return s.store.Snapshot() },
		ConfigReady: s.store.Ready(),
	})
	if err != nil {
		return nil, fmt.Errorf("building audiences: %w", err)
	}
	if err := au.Listen(); err != nil {
		return nil, fmt.Errorf("audiences: listening on %s (AUDIENCES_ADDR): %w", acfg.Addr, err)
	}
	s.audiencesAddr = au.Addr()
	return au, nil
}

// buildConsole builds the console, with a token of its own when CONSOLE_TOKEN is empty, the
// profile API's token and the addresses ingest and audiences took, and opens its listener
// (ConsoleAddr). It comes last: it needs those addresses.
func (s *Stack) buildConsole(deps platform.Deps, keys *shred.Keyring) (platform.Runner, error) {
	ccfg := s.cfg.Console
	if ccfg.Token == "" {
		var err error
		if ccfg.Token, err = consoleToken(s.cfg.DataDir); err != nil {
			return nil, err
		}
		s.consoleTokenGenerated = true
		ccfg.TokenFile = filepath.Join(s.cfg.DataDir, consoleTokenFile) // for the sign-in page's help
		if abs, err := filepath.Abs(ccfg.TokenFile); err == nil {
			ccfg.TokenFile = abs
		}
	}
	s.consoleToken = ccfg.Token
	if ccfg.AudiencesToken == "" {
		ccfg.AudiencesToken = s.audiencesToken
	}
	if ccfg.AudiencesURL == console.DefaultConfig().AudiencesURL {
		ccfg.AudiencesURL = "http://" + s.AudiencesAddr() // the address audiences took
	}
	if ccfg.IngestURL == console.DefaultConfig().IngestURL {
		ccfg.IngestURL = "http://" + s.ingestAddr // the address ingest took
	}
	con, err := console.New(ccfg, console.Deps{Deps: deps, Keys: keys, Store: s.store})
	if err != nil {
		return nil, fmt.Errorf("building console: %w", err)
	}
	if err := con.Listen(); err != nil {
		return nil, fmt.Errorf("console: listening on %s (CONSOLE_ADDR): %w", ccfg.Addr, err)
	}
	s.consoleAddr = con.Addr()
	return con, nil
}

// consoleTokenFile and audiencesTokenFile are where `make run` keeps the tokens it generated
// for the console and the profile API, in DATA_DIR.
const (
	consoleTokenFile   = "console-token"
	audiencesTokenFile = "audiences-token"
)

// consoleToken returns the console token of dataDir: the one generated before, else a new
// random one, written (mode 0600) for the next start. make run never prints it (stderr is where
// logs are collected): it says where the file is.
func consoleToken(dataDir string) (string, error) {
	return dataDirToken(dataDir, consoleTokenFile, "ct_")
}

// dataDirToken returns the token kept in dataDir/file: the one generated before, else a new
// random one (prefix and 48 hex digits), written (mode 0600) for the next start.
func dataDirToken(dataDir, file, prefix string) (string, error) {
	path := filepath.Join(dataDir, file)
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 16 {
		if err := os.Chmod(path, 0o600); err != nil { // only its owner reads it
			return "", fmt.Errorf("console token: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	token := prefix + hex.EncodeToString(raw)
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", fmt.Errorf("keeping a generated token in DATA_DIR: %w", err)
	}
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("keeping a generated token in DATA_DIR: %w", err)
	}
	return token, nil
}

// ConsoleAddr is where the console's API listens.
func (s *Stack) ConsoleAddr() string { return s.consoleAddr }

// ConsoleToken is the console's bearer token (CONSOLE_TOKEN, or the one generated for the
// data directory), and whether it was generated.
func (s *Stack) ConsoleToken() (token string, generated bool) {
	return s.consoleToken, s.consoleTokenGenerated
}

// AudiencesToken is the profile API's bearer token: AUDIENCES_TOKEN, or the one generated for
// the data directory (kept in DATA_DIR/audiences-token).
func (s *Stack) AudiencesToken() string { return s.audiencesToken }

// AudiencesAddr is the address the profile API of the audiences service listens on.
func (s *Stack) AudiencesAddr() string { return s.audiencesAddr }

// IngestAddr is where the tracking API listens.
func (s *Stack) IngestAddr() string { return s.ingestAddr }

var (
	_ platform.Runner = (*ingest.Service)(nil)
	_ platform.Runner = (*router.Service)(nil)
	_ platform.Runner = (*deliverer.Service)(nil)
	_ platform.Runner = (*audiences.Service)(nil)
	_ platform.Runner = (*console.Service)(nil)
)

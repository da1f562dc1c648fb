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
// own ConfigFromEnviron in ConfigFromEnv) exactly as its own main does.
func (s *Stack) addServices(ctx context.Context) error {
	defer endBuild(ctx)
	// One health for the whole process: ingest's /healthz and /readyz (the only ones make run
	// serves) also say when the router's pipe is replacing a failed Kafka session.
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
	icfg := s.cfg.Ingest // ConfigFromEnv read it as the ingest command does
	buildAs(ctx, "ingest")
	in, err := ingest.New(icfg, ingest.Deps{
		Keys:        keys,
		Kafka:       s.cfg.Kafka,
		Sources:     func() ingest.Sources { return s.store.Snapshot() },
		ConfigReady: s.store.Ready(),
		Logger:      s.logger,
		Registerer:  s.reg,
		Gatherer:    s.reg,
		Health:      health,
	})
	if err != nil {
		return fmt.Errorf("building ingest: %w", err)
	}
	if err := in.Listen(); err != nil {
		return fmt.Errorf("ingest: listening on %s (INGEST_ADDR): %w", icfg.Addr, err)
	}
	s.ingestAddr = in.Addr()
	s.services = append(s.services, labelled{"ingest", in})

	buildAs(ctx, "router")
	rt, err := router.New(s.cfg.Router, router.Deps{
		Keys:        keys,
		Kafka:       s.cfg.Kafka,
		Config:      func() router.Snapshot { return s.store.Snapshot() },
		ConfigReady: s.store.Ready(),
		Logger:      s.logger,
		Registerer:  s.reg,
		Health:      health,
	})
	if err != nil {
		return fmt.Errorf("building router: %w", err)
	}
	s.services = append(s.services, labelled{"router", rt})

	buildAs(ctx, "deliverer")
	dl, err := deliverer.New(s.cfg.Deliverer, deliverer.Deps{
		Keys:        keys,
		Kafka:       s.cfg.Kafka,
		Config:      func() deliverer.Destinations { return s.store.Snapshot() },
		ConfigReady: s.store.Ready(),
		Logger:      s.logger,
		Registerer:  s.reg,
	})
	if err != nil {
		return fmt.Errorf("building deliverer: %w", err)
	}
	s.services = append(s.services, labelled{"deliverer", dl})

	acfg := s.cfg.Audiences
	if acfg.Token == "" {
		// The profile API holds personal data: make run asks for a token too, its own, which
		// it gives the console (docs/audiences.md#profile-api).
		if acfg.Token, err = dataDirToken(s.cfg.DataDir, audiencesTokenFile, "at_"); err != nil {
			return fmt.Errorf("audiences token: %w", err)
		}
	}
	s.audiencesToken = acfg.Token
	buildAs(ctx, "audiences")
	au, err := audiences.New(acfg, audiences.Deps{
		Keys:        keys,
		Kafka:       s.cfg.Kafka,
		Config:      func() audiences.Snapshot { return s.store.Snapshot() },
		ConfigReady: s.store.Ready(),
		Logger:      s.logger,
		Registerer:  s.reg,
		Gatherer:    s.reg,
		Health:      health,
	})
	if err != nil {
		return fmt.Errorf("building audiences: %w", err)
	}
	if err := au.Listen(); err != nil {
		return fmt.Errorf("audiences: listening on %s (AUDIENCES_ADDR): %w", s.cfg.Audiences.Addr, err)
	}
	s.audiencesAddr = au.Addr()
	s.services = append(s.services, labelled{"audiences", au})

	ccfg := s.cfg.Console
	if ccfg.Token == "" {
		if ccfg.Token, err = consoleToken(s.cfg.DataDir); err != nil {
			return err
		}
		s.consoleTokenGenerated = true
	}
	s.consoleToken = ccfg.Token
	if ccfg.AudiencesToken == "" {
		ccfg.AudiencesToken = acfg.Token
	}
	if ccfg.AudiencesURL == console.DefaultConfig().AudiencesURL {
		ccfg.AudiencesURL = "http://" + s.AudiencesAddr() // the address audiences took
	}
	if ccfg.IngestURL == console.DefaultConfig().IngestURL {
		ccfg.IngestURL = "http://" + s.ingestAddr // the address ingest took
	}
	buildAs(ctx, "console")
	con, err := console.New(ccfg, console.Deps{
		Keys:       keys,
		Kafka:      s.cfg.Kafka,
		Store:      s.store,
		Logger:     s.logger,
		Registerer: s.reg,
		Gatherer:   s.reg,
		Health:     health,
	})
	if err != nil {
		return fmt.Errorf("building console: %w", err)
	}
	if err := con.Listen(); err != nil {
		return fmt.Errorf("console: listening on %s (CONSOLE_ADDR): %w", ccfg.Addr, err)
	}
	s.consoleAddr = con.Addr()
	s.services = append(s.services, labelled{"console", con})
	return nil
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

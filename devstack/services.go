package devstack

import (
	"context"
	"fmt"

	"github.com/tributary-cdp/tributary/deliverer"
	"github.com/tributary-cdp/tributary/ingest"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/router"
	"github.com/tributary-cdp/tributary/schemas"
)

// addServices builds every service that exists and adds it to the stack's runners. Each issue
// that adds a service adds it here, built through its library New exactly as its own main does.
func (s *Stack) addServices(ctx context.Context) error {
	_ = ctx
	icfg, err := ingest.ConfigFromEnv() // every INGEST_* setting, as the ingest command reads them
	if err != nil {
		return err
	}
	icfg.Addr = s.cfg.IngestAddr
	in, err := ingest.New(icfg, ingest.Deps{
		Kafka:      s.cfg.Kafka,
		Sources:    func() ingest.Sources { return s.store.Snapshot() },
		Logger:     s.logger,
		Registerer: s.reg,
		Gatherer:   s.reg,
	})
	if err != nil {
		return fmt.Errorf("building ingest: %w", err)
	}
	if err := in.Listen(); err != nil {
		return fmt.Errorf("ingest: listening on %s (INGEST_ADDR): %w", icfg.Addr, err)
	}
	s.ingestAddr = in.Addr()
	s.services = append(s.services, in)

	rcfg, err := router.ConfigFromEnv()
	if err != nil {
		return err
	}
	rt, err := router.New(rcfg, router.Deps{
		Kafka:       s.cfg.Kafka,
		Config:      func() router.Snapshot { return s.store.Snapshot() },
		ConfigReady: s.store.Ready(),
		Logger:      s.logger,
		Registerer:  s.reg,
	})
	if err != nil {
		return fmt.Errorf("building router: %w", err)
	}
	s.services = append(s.services, rt)

	dcfg, err := deliverer.ConfigFromEnv()
	if err != nil {
		return err
	}
	// The settings of design §4, as make run set them (WEBHOOK_ALLOW_PRIVATE=true and so on).
	if dcfg.RetrySchedule, err = schemas.ParseRetrySchedule(s.cfg.RetrySchedule); err != nil {
		return err
	}
	dcfg.RetryWindow, dcfg.Timeout, dcfg.AllowPrivate = s.cfg.RetryWindow, s.cfg.DeliveryTimeout, s.cfg.WebhookAllowPrivate
	dl, err := deliverer.New(dcfg, deliverer.Deps{
		Kafka:       s.cfg.Kafka,
		Config:      func() deliverer.Destinations { return s.store.Snapshot() },
		ConfigReady: s.store.Ready(),
		Logger:      s.logger,
		Registerer:  s.reg,
	})
	if err != nil {
		return fmt.Errorf("building deliverer: %w", err)
	}
	s.services = append(s.services, dl)
	return nil
}

// IngestAddr is where the tracking API listens.
func (s *Stack) IngestAddr() string { return s.ingestAddr }

var (
	_ platform.Runner = (*ingest.Service)(nil)
	_ platform.Runner = (*router.Service)(nil)
	_ platform.Runner = (*deliverer.Service)(nil)
)

package servicetest

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/shred"
)

// Keyring starts a keyring of tributary.keys on the Env's broker with sealing on (the
// SHRED_EVENTS ingest has by default), runs it until the test ends, and waits until it is
// ready: a test seals records the way ingest does (Seal), and opens what services wrote.
func (e *Env) Keyring() *shred.Keyring {
	e.T.Helper()
	s := e.Kafka
	s.ShredEvents = true
	k, err := shred.New(shred.Config{Kafka: s, Opts: e.KafkaOpts, Logger: e.Logger})
	if err != nil {
		e.T.Fatal(err)
	}
	e.Start("keyring", k.Run)
	select {
	case <-k.Ready():
	case <-time.After(10 * time.Second):
		e.T.Fatal("keyring not ready within 10s")
	}
	return k
}

// Seal seals recs in place with their users' data keys (their record keys: what ingest
// does with tracking.events), through k.
func (e *Env) Seal(k *shred.Keyring, recs ...*kgo.Record) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(e.Ctx, 10*time.Second)
	defer cancel()
	if err := k.SealRecords(ctx, recs, shred.RecordKey); err != nil {
		e.T.Fatalf("sealing: %v", err)
	}
}

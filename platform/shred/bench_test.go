package shred_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// BenchmarkSealOpen measures the hot path of a sealed event: ingest's Seal (the key known; in
// place, as ingest seals a batch) and a consumer's Open (into a reused buffer, as the router
// opens), on a 1 KB event (docs/benchmarks.md#crypto-shredding).
func BenchmarkSealOpen(b *testing.B) {
	brokers := kafkatest.Embedded(b)
	k, err := shred.New(shred.Config{Kafka: settings(brokers), Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-k.Ready()
	plain := bytes.Repeat([]byte("x"), 1024)
	if err := k.Prepare(ctx, "u1"); err != nil {
		b.Fatal(err)
	}
	b.Run("seal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(plain)))
		for b.Loop() {
			if _, _, err := k.Seal(ctx, "u1", plain); err != nil {
				b.Fatal(err)
			}
		}
	})
	sealed, id, _ := k.Seal(ctx, "u1", plain)
	r := &kgo.Record{Value: sealed, Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("web")}, {Key: schemas.HeaderDataKey, Value: id}}}
	b.Run("seal-in-place", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(plain)))
		buf := make([]byte, 0, len(plain)+shred.Overhead)
		rec := &kgo.Record{Key: []byte("u1")}
		recs := []*kgo.Record{rec}
		for b.Loop() {
			rec.Value, rec.Headers = append(buf[:0], plain...), rec.Headers[:0]
			if err := k.SealRecordsInPlace(ctx, recs, shred.RecordKey); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(plain)))
		for b.Loop() {
			if _, err := k.Open(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open-reused-buffer", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(plain)))
		var buf []byte
		for b.Loop() {
			key, err := k.Key(id)
			if err == nil {
				buf, err = key.Open(buf[:0], sealed)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

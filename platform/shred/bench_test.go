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

// BenchmarkSealOpen measures the hot path of a sealed event: ingest's Seal (the key known)
// and a consumer's Open, on a 1 KB event (docs/benchmarks.md#crypto-shredding).
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
	b.Run("open", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(plain)))
		for b.Loop() {
			if _, err := k.Open(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// newInbound builds the Kafka front door: a platform.Pipe over the consumer group of
// tracking.inbound. Each record is one Segment-spec message with the header write-key; it is
// validated and enriched exactly as over HTTP and forwarded to tracking.events or
// tracking.rejected. Offsets are committed only after every forwarded record of a poll was
// acknowledged, so a crash re-reads, never loses.
func (s *Service) newInbound() (*platform.Pipe, error) {
	return platform.NewPipe(platform.PipeConfig{
		Name:            "ingest front door",
		Kafka:           s.deps.Kafka,
		Group:           s.cfg.InboundGroup,
		Topics:          []string{s.cfg.InboundTopic},
		Transform:       s.forwardBatch,
		MaxPollRecords:  1000,
		Ready:           []<-chan struct{}{s.keys.Ready()},
		ProduceTimeout:  s.cfg.ProduceTimeout,
		ShutdownTimeout: s.cfg.ShutdownTimeout,
		Opts:            append([]kgo.Opt{kgo.ProducerBatchCompression(kgo.NoCompression())}, s.deps.KafkaOpts...),
		Logger:          s.logger.With().Str("consumer", "inbound").Logger(),
	})
}

// forwardBatch prepares the forwarded record of every record of one poll of tracking.inbound,
// sealed with its user's data key (docs/security.md#crypto-shredding).
func (s *Service) forwardBatch(ctx context.Context, fs kgo.Fetches) ([]*kgo.Record, error) {
	recs := make([]*kgo.Record, 0, fs.NumRecords())
	var accepted, rejected int
	fs.EachRecord(func(r *kgo.Record) {
		out, ok := s.forward(r)
		recs = append(recs, out)
		if ok {
			accepted++
		} else {
			rejected++
		}
	})
	s.metrics.inbound.WithLabelValues("accepted").Add(float64(accepted))
	s.metrics.inbound.WithLabelValues("rejected").Add(float64(rejected))
	// A key write Kafka does not acknowledge is retried: the poll is not committed meanwhile.
	err := platform.RetryUntil(ctx, s.logger, "sealing the front door's records", func(ctx context.Context) error {
		return s.keys.SealRecordsInPlace(ctx, recs, shred.RecordKey)
	})
	if err != nil {
		return nil, fmt.Errorf("sealing: %w", err)
	}
	return recs, nil
}

// forward prepares the tracking.events record of r, or its tracking.rejected record.
func (s *Service) forward(r *kgo.Record) (*kgo.Record, bool) {
	var key string
	for _, h := range r.Headers {
		if h.Key == schemas.HeaderWriteKey {
			key = string(h.Value)
		}
	}
	src := s.lookup(key, false, "")
	if src == nil {
		reason := "missing write-key header"
		if key != "" {
			reason = "unknown write key"
		}
		s.metrics.rejected.WithLabelValues("unauthorized").Inc()
		return s.rejectedRecord(r.Value, nil, r.Key, &rejection{"unauthorized", reason}), false
	}
	// A record produced with a traceparent header continues that trace (docs/operations.md#tracing).
	env := &envelope{receivedAt: time.Now().UTC(), trace: platform.TraceFromRecord(r)}
	var span platform.Span
	if s.tracer.Enabled() {
		span, env.trace = s.tracer.Start(env.trace, "ingest "+r.Topic, platform.SpanConsumer,
			attribute.String(attrSourceID, src.ID), attribute.Int(attrEventCount, 1))
		defer span.End()
	}
	out, rej := s.prepare(schemas.ValidUTF8(r.Value), src, env)
	if rej != nil {
		span.Fail(rej.code, rej.reason)
	}
	if rej != nil {
		s.metrics.rejected.WithLabelValues(rej.code).Inc()
		return s.rejectedRecord(r.Value, src, r.Key, rej), false
	}
	return out, true
}

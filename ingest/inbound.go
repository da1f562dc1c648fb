package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// inbound is the Kafka front door: a consumer group on tracking.inbound. Each record is one
// Segment-spec message with the header write-key; it is validated and enriched exactly as
// over HTTP and forwarded to tracking.events or tracking.rejected. Offsets are committed only
// after every forwarded record of a poll was acknowledged, so a crash re-reads, never loses.
type inbound struct {
	s  *Service
	cl *kgo.Client
}

func (s *Service) newInbound() (*inbound, error) {
	opts := append([]kgo.Opt{
		kgo.ConsumerGroup(s.cfg.InboundGroup),
		kgo.ConsumeTopics(s.cfg.InboundTopic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(250 * time.Millisecond),
	}, s.deps.KafkaOpts...)
	cl, err := platform.NewKafkaClient(s.deps.Kafka, s.logger, opts...)
	if err != nil {
		return nil, fmt.Errorf("ingest front door: %w", err)
	}
	return &inbound{s: s, cl: cl}, nil
}

// Run consumes until ctx is done, then commits what was forwarded and leaves the group.
func (in *inbound) Run(ctx context.Context) error {
	defer in.cl.Close()
	for {
		fs := in.cl.PollRecords(ctx, 1000)
		if ctx.Err() != nil {
			in.cl.AllowRebalance()
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			in.s.logger.Warn().Err(err).Str("topic", t).Int32("partition", p).Msg("fetching tracking.inbound")
		})
		var recs []*kgo.Record
		var accepted, rejectedN int
		fs.EachRecord(func(r *kgo.Record) {
			out, ok := in.forward(r)
			recs = append(recs, out)
			if ok {
				accepted++
			} else {
				rejectedN++
			}
		})
		if len(recs) > 0 {
			// Forward, then commit: retried until Kafka acknowledges or we are stopped (the
			// uncommitted records are then read again by the next owner).
			for {
				err := in.s.produce(ctx, recs)
				if err == nil {
					break
				}
				in.s.logger.Warn().Err(err).Msg("forwarding tracking.inbound; retrying")
				select {
				case <-ctx.Done():
					in.cl.AllowRebalance()
					return nil
				case <-time.After(time.Second):
				}
			}
			if err := in.cl.CommitUncommittedOffsets(context.WithoutCancel(ctx)); err != nil {
				in.s.logger.Warn().Err(err).Msg("committing tracking.inbound offsets")
			}
			in.s.metrics.inbound.WithLabelValues("accepted").Add(float64(accepted))
			in.s.metrics.inbound.WithLabelValues("rejected").Add(float64(rejectedN))
		}
		in.cl.AllowRebalance()
	}
}

// forward prepares the tracking.events record of r, or its tracking.rejected record.
func (in *inbound) forward(r *kgo.Record) (*kgo.Record, bool) {
	var key string
	for _, h := range r.Headers {
		if h.Key == schemas.HeaderWriteKey {
			key = string(h.Value)
		}
	}
	src := in.s.lookup(key, false, "")
	if src == nil {
		reason := "missing write-key header"
		if key != "" {
			reason = "unknown write key"
		}
		in.s.metrics.rejected.WithLabelValues("unauthorized").Inc()
		return in.s.rejectedRecord(r.Value, nil, r.Key, &rejection{"unauthorized", reason}), false
	}
	env := &envelope{receivedAt: time.Now().UTC()}
	out, rej := in.s.prepare(r.Value, src, env)
	if rej != nil {
		in.s.metrics.rejected.WithLabelValues(rej.code).Inc()
		return in.s.rejectedRecord(r.Value, src, r.Key, rej), false
	}
	return out, true
}

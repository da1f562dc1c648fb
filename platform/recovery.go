package platform

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Recovery follows one client's connections to Kafka so that, after an outage, the client's
// consumer or producer logs once, at info, that it resumed — after how long, and at which
// offsets — and an operator sees the recovery, not only the failures
// (docs/operations.md#broker-outages). An outage starts at the first failed connection, request,
// poll or produce (a broker killed, stopped or unreachable). A consumer adds Hook to its client
// and calls Resumed after each poll with records: the outage ends at the first poll that returns
// records again. A producer adds ProducerHook: the outage ends at the first record Kafka
// acknowledges again. It is safe for concurrent use.
type Recovery struct {
	logger zerolog.Logger
	what   string
	now    func() time.Time

	isDown    atomic.Bool // whether downSince is set: the fast path of every acknowledgement
	mu        sync.Mutex
	downSince time.Time // zero: no outage
	failures  int
	lastErr   error
}

// NewRecovery returns the Recovery of the consumer what (e.g. "router events"), logging to
// logger.
func NewRecovery(logger zerolog.Logger, what string) *Recovery {
	return &Recovery{logger: logger, what: what, now: time.Now}
}

// Hook is the kgo hook to add to the consumer's client (kgo.WithHooks): it sees every failed
// connection and request.
func (r *Recovery) Hook() kgo.Hook { return recoveryHook{r} }

// ProducerHook is Hook for a producer's client: it also sees each record's acknowledgement,
// and the first one after an outage logs that the producer resumed.
func (r *Recovery) ProducerHook() kgo.Hook { return producerRecoveryHook{recoveryHook{r}} }

type recoveryHook struct{ r *Recovery }

type producerRecoveryHook struct{ recoveryHook }

var _ kgo.HookProduceRecordUnbuffered = producerRecoveryHook{}

func (h producerRecoveryHook) OnProduceRecordUnbuffered(rec *kgo.Record, err error) {
	if err != nil {
		h.r.Failed(err)
		return
	}
	if !h.r.down() {
		return
	}
	h.r.resumed(fmt.Sprintf("%s/%d@%d", rec.Topic, rec.Partition, rec.Offset), "resumed producing after a Kafka outage")
}

var (
	_ kgo.HookBrokerConnect = recoveryHook{}
	_ kgo.HookBrokerRead    = recoveryHook{}
	_ kgo.HookBrokerWrite   = recoveryHook{}
)

func (h recoveryHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	h.r.Failed(err)
}

func (h recoveryHook) OnBrokerRead(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	h.r.Failed(err)
}

func (h recoveryHook) OnBrokerWrite(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	h.r.Failed(err)
}

// Failed records a failure talking to Kafka (nil, and a cancellation by the caller, are
// ignored): the first one starts an outage.
func (r *Recovery) Failed(err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.downSince.IsZero() {
		r.downSince = r.now()
		r.isDown.Store(true)
	}
	r.failures++
	r.lastErr = err
}

// Resumed is called after a poll that returned records. After an outage it logs, once, that
// the consumer resumed: the outage's length, the failures seen, and the offset of the first
// record of each partition of fs (where it resumed). It says whether it logged.
func (r *Recovery) Resumed(fs kgo.Fetches) bool {
	if !r.down() {
		return false
	}
	return r.resumed(firstOffsets(fs), "resumed after a Kafka outage")
}

func (r *Recovery) down() bool { return r.isDown.Load() }

// resumed ends the outage, if there is one, logging msg with the offsets where it resumed.
func (r *Recovery) resumed(offsets, msg string) bool {
	r.mu.Lock()
	since, failures, lastErr := r.downSince, r.failures, r.lastErr
	r.downSince, r.failures, r.lastErr = time.Time{}, 0, nil
	r.isDown.Store(false)
	r.mu.Unlock()
	if since.IsZero() {
		return false
	}
	r.logger.Info().Str("after", r.now().Sub(since).Round(time.Millisecond).String()).
		Int("failures", failures).AnErr("last_error", lastErr).Str("offsets", offsets).
		Msg(r.what + ": " + msg)
	return true
}

// firstOffsets lists the first offset of each partition of fs: "topic/partition@offset ...".
func firstOffsets(fs kgo.Fetches) string {
	var parts []string
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) > 0 {
			parts = append(parts, fmt.Sprintf("%s/%d@%d", p.Topic, p.Partition, p.Records[0].Offset))
		}
	})
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

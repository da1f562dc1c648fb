package platform

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Recovery follows one consumer's connections to Kafka so that, after an outage, the consumer
// logs once, at info, that it resumed — after how long, and at which offsets — and an operator
// sees the recovery, not only the failures (docs/operations.md#broker-outages). An outage starts
// at the first failed connection, request or poll (a broker killed, stopped or unreachable);
// it ends at the first poll that returns records again. Add its Hook to the consumer's client
// and call Resumed after each poll with records. It is safe for concurrent use.
type Recovery struct {
	logger zerolog.Logger
	what   string
	now    func() time.Time

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

type recoveryHook struct{ r *Recovery }

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
	}
	r.failures++
	r.lastErr = err
}

// Resumed is called after a poll that returned records. After an outage it logs, once, that
// the consumer resumed: the outage's length, the failures seen, and the offset of the first
// record of each partition of fs (where it resumed). It says whether it logged.
func (r *Recovery) Resumed(fs kgo.Fetches) bool {
	r.mu.Lock()
	since, failures, lastErr := r.downSince, r.failures, r.lastErr
	r.downSince, r.failures, r.lastErr = time.Time{}, 0, nil
	r.mu.Unlock()
	if since.IsZero() {
		return false
	}
	r.logger.Info().Str("after", r.now().Sub(since).Round(time.Millisecond).String()).
		Int("failures", failures).AnErr("last_error", lastErr).Str("offsets", firstOffsets(fs)).
		Msg(r.what + ": resumed after a Kafka outage")
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

package analytics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
)

// DefaultKafkaTopic is the topic Tributary's ingest reads Segment-spec messages from.
const DefaultKafkaTopic = "tracking.inbound"

// KafkaHeaderWriteKey is the record header that names the source (its write key).
const KafkaHeaderWriteKey = "write-key"

// KafkaTransport, set as Client.Kafka, makes the client produce each message as one record to
// tracking.inbound with segmentio/kafka-go, for server code inside the Kafka network: the
// record value is the message's JSON (what the HTTP transport sends inside its batch, plus
// "sentAt"), the key its userId (else anonymousId), and the header write-key the client's
// write key. Ingest validates and enriches these records exactly as HTTP calls.
//
// Batching, the limits, retries, Callback and Close are those of the HTTP transport: a flush
// produces the batch with one WriteMessages call and waits for every in-sync replica to
// acknowledge it; records refused for good (e.g. too large for the topic) fail, the others
// are retried.
type KafkaTransport struct {
	// Brokers are the bootstrap servers, host:port. Required.
	Brokers []string
	// Topic defaults to DefaultKafkaTopic.
	Topic string
	// TLS, when set, encrypts the connections.
	TLS *tls.Config
	// SASL, when set, authenticates them (see github.com/segmentio/kafka-go/sasl/plain and
	// .../scram).
	SASL sasl.Mechanism
}

// sentAtMember is the size of `,"sentAt":"2006-01-02T15:04:05.000Z"` plus the closing brace
// it is written before.
const sentAtMember = len(`,"sentAt":"2006-01-02T15:04:05.000Z"}`)

type kafkaTransport struct {
	w       *kafka.Writer
	tr      *kafka.Transport
	headers []kafka.Header
}

func newKafkaTransport(k *KafkaTransport, writeKey string) *kafkaTransport {
	topic := k.Topic
	if topic == "" {
		topic = DefaultKafkaTopic
	}
	tr := &kafka.Transport{TLS: k.TLS, SASL: k.SASL, ClientID: LibraryName}
	return &kafkaTransport{
		tr: tr,
		w: &kafka.Writer{
			Addr:         kafka.TCP(k.Brokers...),
			Topic:        topic,
			Balancer:     &kafka.Murmur2Balancer{}, // the partitioner of the Java client and franz-go
			RequiredAcks: kafka.RequireAll,
			MaxAttempts:  1, // the client's backoff retries
			// The client batches already: a WriteMessages call is one flush and must not
			// wait for the writer's own batch timer.
			BatchTimeout: time.Millisecond,
			BatchSize:    MaxBatchMessages,
			BatchBytes:   2 * MaxBatchBytes,
			Transport:    tr,
		},
		headers: []kafka.Header{{Key: KafkaHeaderWriteKey, Value: []byte(writeKey)}},
	}
}

func (t *kafkaTransport) send(ctx context.Context, b *batch, todo []int32) ([]int32, error) {
	// Each record is the message with "sentAt" added: what the HTTP transport says once per
	// batch, ingest needs per record to correct the client's clock skew.
	size := 0
	for _, i := range todo {
		v, _ := b.value(i)
		size += len(v) + sentAtMember
	}
	vals := make([]byte, 0, size)
	var ts [24]byte
	sentAt := appendTime(ts[:0], time.Now())
	msgs := make([]kafka.Message, len(todo))
	for j, i := range todo {
		v, k := b.value(i)
		start := len(vals)
		vals = append(vals, v[:len(v)-1]...) // without its closing brace
		vals = append(vals, `,"sentAt":"`...)
		vals = append(vals, sentAt...)
		vals = append(vals, `"}`...)
		msgs[j] = kafka.Message{Key: k, Value: vals[start:len(vals):len(vals)], Headers: t.headers}
	}
	err := t.w.WriteMessages(ctx, msgs...)
	if err == nil {
		return nil, nil
	}
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) && len(werrs) == len(todo) {
		var retry []int32
		var first error
		for j, e := range werrs {
			switch {
			case e == nil:
			case permanentKafka(e):
				b.refs[todo[j]].err = fmt.Errorf("analytics: producing to %s: %w", t.w.Topic, e)
			default:
				retry = append(retry, todo[j])
				if first == nil {
					first = e
				}
			}
		}
		if first == nil {
			return nil, nil
		}
		return retry, fmt.Errorf("analytics: producing to %s: %w", t.w.Topic, first)
	}
	if permanentKafka(err) {
		fail(b, todo, fmt.Errorf("analytics: producing to %s: %w", t.w.Topic, err))
		return nil, nil
	}
	return todo, fmt.Errorf("analytics: producing to %s: %w", t.w.Topic, err)
}

// permanentKafka reports whether retrying err cannot help: a broker error Kafka does not mark
// retriable (message too large, not authorized, ...), or a record too large for the writer.
func permanentKafka(err error) bool {
	var ke kafka.Error
	if errors.As(err, &ke) {
		return !ke.Temporary()
	}
	var tooLarge kafka.MessageTooLargeError
	return errors.As(err, &tooLarge)
}

func (t *kafkaTransport) close() error {
	err := t.w.Close()
	t.tr.CloseIdleConnections()
	return err
}

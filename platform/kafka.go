package platform

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// FetchMaxBytes bounds one fetch response of every consumer (franz-go's default is 50 MiB): a
// client holds one fetched response per broker until it is polled, decompressed, so under a
// backlog each of the product's consumers (the router, the deliverer, audiences, the console's
// views, the config store) would otherwise keep tens of megabytes of read-ahead in memory. 4 MiB
// is thousands of events, enough to keep a poll loop busy; a client that needs more (a
// compacted topic read once at start) asks for it.
const FetchMaxBytes = 4 << 20

// ClientOpts returns the franz-go options that reach the cluster: seed brokers, SASL (PLAIN or
// SCRAM) and TLS (system roots plus TLSCAFile). It validates the settings first. With
// ShredEvents its producers do not compress (see SealedCompression).
func (s KafkaSettings) ClientOpts() ([]kgo.Opt, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(s.Brokers...), kgo.FetchMaxBytes(FetchMaxBytes)}
	if s.ShredEvents {
		opts = append(opts, SealedCompression())
	}
	switch s.SASLMechanism {
	case SASLPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: s.SASLUsername, Pass: s.SASLPassword}.AsMechanism()))
	case SASLScramSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: s.SASLUsername, Pass: s.SASLPassword}.AsSha256Mechanism()))
	case SASLScramSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: s.SASLUsername, Pass: s.SASLPassword}.AsSha512Mechanism()))
	}
	if s.TLS {
		cfg, err := s.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	return opts, nil
}

// SealedCompression is the producer compression of a client whose records are sealed
// (docs/security.md#crypto-shredding): none. AES-GCM ciphertext does not compress, so a
// compressing producer (franz-go's default is snappy) would spend CPU on every batch of the
// tracking, delivery and audiences topics for nothing; the few plain records such a client also
// writes (config, audit, keys) are small. Options given after it (a client's own) still win.
func SealedCompression() kgo.Opt { return kgo.ProducerBatchCompression(kgo.NoCompression()) }

// tlsConfig trusts the system roots plus the certificates of TLSCAFile. franz-go sets the
// server name of each broker connection from the broker's host.
func (s KafkaSettings) tlsConfig() (*tls.Config, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if s.TLSCAFile != "" {
		pem, err := os.ReadFile(s.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("KAFKA_TLS_CA_FILE: reading %s: %w", s.TLSCAFile, err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("KAFKA_TLS_CA_FILE: %s holds no PEM certificate", s.TLSCAFile)
		}
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, nil
}

// NewKafkaClient builds a franz-go client for the settings. Its internal logs go to logger at
// warn and above ([NewKgoLogger]); opts come last, so they may override anything, the log
// level included (kgo.WithLogger). The caller owns the client and must Close it.
func NewKafkaClient(s KafkaSettings, logger zerolog.Logger, opts ...kgo.Opt) (*kgo.Client, error) {
	all, err := s.clientOptsLogging(logger, opts)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("creating Kafka client: %w", err)
	}
	return cl, nil
}

// clientOptsLogging is ClientOpts, then the client's log to logger at warn and above, then
// opts: what every client and transactional session of Tributary is built from.
func (s KafkaSettings) clientOptsLogging(logger zerolog.Logger, opts []kgo.Opt) ([]kgo.Opt, error) {
	base, err := s.ClientOpts()
	if err != nil {
		return nil, err
	}
	return append(append(base, kgo.WithLogger(NewKgoLogger(logger, kgo.LogLevelWarn))), opts...), nil
}

// NewKgoLogger adapts a zerolog logger to franz-go's kgo.Logger: messages at level and above
// are logged with their key-value pairs as fields. It is safe for concurrent use.
func NewKgoLogger(logger zerolog.Logger, level kgo.LogLevel) kgo.Logger {
	return kgoLogger{logger: logger.With().Str("component", "kgo").Logger(), level: level}
}

type kgoLogger struct {
	logger zerolog.Logger
	level  kgo.LogLevel
}

var _ kgo.Logger = kgoLogger{}

func (l kgoLogger) Level() kgo.LogLevel { return l.level }

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var ev *zerolog.Event
	switch level {
	case kgo.LogLevelError:
		ev = l.logger.Error()
	case kgo.LogLevelWarn:
		ev = l.logger.Warn()
	case kgo.LogLevelInfo:
		ev = l.logger.Info()
	case kgo.LogLevelDebug:
		ev = l.logger.Debug()
	default:
		return
	}
	for i := 0; i+1 < len(keyvals); i += 2 {
		key, ok := keyvals[i].(string)
		if !ok {
			key = fmt.Sprint(keyvals[i])
		}
		if err, ok := keyvals[i+1].(error); ok {
			ev = ev.AnErr(key, err)
			continue
		}
		ev = ev.Interface(key, keyvals[i+1])
	}
	ev.Msg(msg)
}

// ProduceAll produces recs and waits until Kafka has acknowledged every one, or failed it; it
// returns the first failure, naming the topic. ctx bounds the produce requests (pass one with a
// deadline: a record that is never acknowledged is failed when it ends).
//
// It is franz-go's ProduceSync: since the caller waits, the partitions it produced to stop
// lingering and are sent at once, so a lone record does not wait out the client's linger
// (kgo.ProducerLinger, 10 ms by default). Records produced concurrently still share requests:
// while one request is in flight, the next gathers what arrives. Only a topic's first records,
// produced before the client knows its partitions, may still wait for the linger. It is safe
// for concurrent use, as the client is.
func ProduceAll(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	if len(recs) == 0 {
		return nil
	}
	for _, res := range cl.ProduceSync(ctx, recs...) {
		if res.Err != nil {
			return fmt.Errorf("producing to %s: %w", res.Record.Topic, res.Err)
		}
	}
	return nil
}

package platform

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"

	"github.com/caarlos0/env/v11"
)

// SASL mechanisms accepted in KAFKA_SASL_MECHANISM.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// KafkaSettings says how to reach the Kafka cluster and how to create topics on it. Every field
// comes from one environment variable (design §4); the zero value is not valid (no brokers).
type KafkaSettings struct {
	// Brokers are the bootstrap servers, host:port each (KAFKA_BROKERS, comma-separated).
	// Empty means "no cluster": `make run` then starts the embedded broker and fills this in.
	Brokers []string `env:"KAFKA_BROKERS" envSeparator:","`
	// SASLMechanism is "", PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (KAFKA_SASL_MECHANISM).
	SASLMechanism string `env:"KAFKA_SASL_MECHANISM"`
	// SASLUsername and SASLPassword authenticate with SASLMechanism (KAFKA_SASL_USERNAME,
	// KAFKA_SASL_PASSWORD). The password is never logged.
	SASLUsername string `env:"KAFKA_SASL_USERNAME"`
	SASLPassword string `env:"KAFKA_SASL_PASSWORD"`
	// TLS dials the brokers with TLS, trusting the system roots plus TLSCAFile (KAFKA_TLS).
	TLS bool `env:"KAFKA_TLS"`
	// TLSCAFile is a PEM file of extra CA certificates to trust (KAFKA_TLS_CA_FILE); it needs
	// TLS.
	TLSCAFile string `env:"KAFKA_TLS_CA_FILE"`
	// ReplicationFactor is used when creating topics (KAFKA_REPLICATION_FACTOR); -1, the
	// default, lets the broker choose (default.replication.factor).
	ReplicationFactor int16 `env:"KAFKA_REPLICATION_FACTOR" envDefault:"-1"`
	// Partitions is the partition count of every created topic but tributary.config
	// (KAFKA_PARTITIONS, default 6).
	Partitions int32 `env:"KAFKA_PARTITIONS" envDefault:"6"`
}

// LoadKafkaSettings reads KafkaSettings from the process environment and validates them,
// except that Brokers may be empty: an empty KAFKA_BROKERS means "start the embedded broker"
// to `make run` (design §4). A service that needs a real cluster gets the error naming
// KAFKA_BROKERS from ClientOpts, NewKafkaClient or Validate.
func LoadKafkaSettings() (KafkaSettings, error) {
	s, err := ParseKafkaSettings(nil)
	if err != nil {
		return s, err
	}
	return s, s.validate(false)
}

// ParseKafkaSettings reads KafkaSettings from environ (variable name to value), or from the
// process environment when environ is nil, without validating them. It fails only when a
// variable does not parse (KAFKA_TLS=maybe, KAFKA_PARTITIONS=six).
func ParseKafkaSettings(environ map[string]string) (KafkaSettings, error) {
	var s KafkaSettings
	if err := env.ParseWithOptions(&s, env.Options{Environment: environ}); err != nil {
		return s, fmt.Errorf("reading Kafka settings: %w", nameVariables[KafkaSettings](err))
	}
	var brokers []string
	for _, b := range s.Brokers {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	s.Brokers = brokers
	s.SASLMechanism = strings.ToUpper(strings.TrimSpace(s.SASLMechanism))
	return s, nil
}

// Validate checks the settings and returns every problem, each naming its variable. At least
// one broker is required.
func (s KafkaSettings) Validate() error { return s.validate(true) }

func (s KafkaSettings) validate(requireBrokers bool) error {
	var errs []error
	bad := func(variable, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", variable, fmt.Sprintf(format, args...)))
	}
	if len(s.Brokers) == 0 && requireBrokers {
		bad("KAFKA_BROKERS", "no broker given")
	}
	for _, b := range s.Brokers {
		host, port, err := net.SplitHostPort(b)
		if err != nil {
			bad("KAFKA_BROKERS", "%q is not host:port", b)
			continue
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
			bad("KAFKA_BROKERS", "%q is not host:port", b)
		}
	}
	switch s.SASLMechanism {
	case "":
		if s.SASLUsername != "" || s.SASLPassword != "" {
			bad("KAFKA_SASL_MECHANISM", "must be set when KAFKA_SASL_USERNAME or KAFKA_SASL_PASSWORD is")
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if s.SASLUsername == "" {
			bad("KAFKA_SASL_USERNAME", "required with KAFKA_SASL_MECHANISM=%s", s.SASLMechanism)
		}
		if s.SASLPassword == "" {
			bad("KAFKA_SASL_PASSWORD", "required with KAFKA_SASL_MECHANISM=%s", s.SASLMechanism)
		}
	default:
		bad("KAFKA_SASL_MECHANISM", "%q is not one of %s, %s, %s", s.SASLMechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
	}
	if s.TLSCAFile != "" && !s.TLS {
		bad("KAFKA_TLS_CA_FILE", "set but KAFKA_TLS is not true")
	}
	if s.ReplicationFactor != -1 && s.ReplicationFactor < 1 {
		bad("KAFKA_REPLICATION_FACTOR", "%d: must be -1 (broker default) or at least 1", s.ReplicationFactor)
	}
	if s.Partitions < 1 {
		bad("KAFKA_PARTITIONS", "%d: must be at least 1", s.Partitions)
	}
	return errors.Join(errs...)
}

// nameVariables rewrites the env library's parse errors, which name struct fields, to name the
// environment variable instead: "KAFKA_TLS: strconv.ParseBool: parsing "maybe": invalid syntax".
func nameVariables[T any](err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err
	}
	errs := make([]error, len(agg.Errors))
	for i, e := range agg.Errors {
		errs[i] = e
		var pe env.ParseError
		if errors.As(e, &pe) {
			if f, ok := reflect.TypeFor[T]().FieldByName(pe.Name); ok {
				errs[i] = fmt.Errorf("%s: %w", f.Tag.Get("env"), pe.Err)
			}
		}
	}
	return errors.Join(errs...)
}

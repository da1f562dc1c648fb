package platform

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/tributary-cdp/tributary/schemas"
)

// SASL mechanisms accepted in KAFKA_SASL_MECHANISM.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// KafkaSettings says how to reach the Kafka cluster and how to create topics on it. Every field
// comes from one environment variable (docs/configuration.md#run-time-settings); start from
// DefaultKafkaSettings, which is not valid (no brokers).
type KafkaSettings struct {
	// Brokers are the bootstrap servers, host:port each (KAFKA_BROKERS, comma-separated).
	// Empty means "no cluster": `make run` then starts the embedded broker and fills this in.
	Brokers []string `env:"KAFKA_BROKERS" doc:"bootstrap servers, host:port, comma-separated; required, except that 'make run' starts an embedded broker when it is empty"`
	// SASLMechanism is "", PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (KAFKA_SASL_MECHANISM).
	SASLMechanism string `env:"KAFKA_SASL_MECHANISM" doc:"'PLAIN', 'SCRAM-SHA-256' or 'SCRAM-SHA-512'; empty: no SASL"`
	// SASLUsername and SASLPassword authenticate with SASLMechanism (KAFKA_SASL_USERNAME,
	// KAFKA_SASL_PASSWORD). The password is never logged.
	SASLUsername string `env:"KAFKA_SASL_USERNAME" doc:"SASL user name (with 'KAFKA_SASL_MECHANISM')"`
	SASLPassword string `env:"KAFKA_SASL_PASSWORD" secret:"true" doc:"SASL password (with 'KAFKA_SASL_MECHANISM'); never logged, taken as it is (not trimmed)"`
	// TLS dials the brokers with TLS, trusting the system roots plus TLSCAFile (KAFKA_TLS).
	TLS bool `env:"KAFKA_TLS" doc:"TLS to the brokers, the system roots trusted"`
	// TLSCAFile is a PEM file of extra CA certificates to trust (KAFKA_TLS_CA_FILE); it needs
	// TLS.
	TLSCAFile string `env:"KAFKA_TLS_CA_FILE" doc:"PEM file of extra CA certificates to trust (needs 'KAFKA_TLS')"`
	// ReplicationFactor is used when creating topics (KAFKA_REPLICATION_FACTOR); -1, the
	// default, lets the broker choose (default.replication.factor).
	ReplicationFactor int16 `env:"KAFKA_REPLICATION_FACTOR" services:"tributary-init, tributary" doc:"replication factor of created topics; -1: the default.replication.factor of the broker (set 3 in production)"`
	// Partitions is the partition count of every created topic but tributary.config
	// (KAFKA_PARTITIONS, default 6).
	Partitions int32 `env:"KAFKA_PARTITIONS" services:"tributary-init, tributary" doc:"partitions of every created topic but 'tributary.config': at most this many replicas of a consumer share the work ([operations.md](operations.md#topics-and-partitions))"`
	// ConfigEncryptionKey encrypts the destinations' secrets on tributary.config and decrypts
	// them when it is read (CONFIG_ENCRYPTION_KEY; schemas.ParseKeyring). Every process that
	// writes or reads the topic needs the same value.
	ConfigEncryptionKey string `env:"CONFIG_ENCRYPTION_KEY" secret:"true" doc:"'<key id>:<base64 of 32 bytes>', comma-separated, the first encrypting: shared secrets, static header values and webhook URLs with credentials are stored AES-256-GCM encrypted in 'tributary.config'; every service needs it ([configuration.md](configuration.md#secrets-at-rest))"`
	// DataEncryptionKey is the master key that seals the per-user data keys on
	// tributary.keys (DATA_ENCRYPTION_KEY, same format as CONFIG_ENCRYPTION_KEY); empty:
	// ConfigEncryptionKey's keys, and with neither the data keys are stored unsealed
	// (docs/security.md#crypto-shredding).
	DataEncryptionKey string `env:"DATA_ENCRYPTION_KEY" secret:"true" doc:"'<key id>:<base64 of 32 bytes>', comma-separated, the first sealing: the master key of the per-user data keys on 'tributary.keys'; empty: the keys of 'CONFIG_ENCRYPTION_KEY', and with neither the data keys are stored unsealed; every service needs it ([security.md](security.md#crypto-shredding))"`
	// ShredEvents seals every message of a user with the user's data key on its way into
	// Kafka (SHRED_EVENTS, default true); false writes records plain, as before
	// crypto-shredding. Sealed records are read either way.
	ShredEvents bool `env:"SHRED_EVENTS" doc:"seal each user's messages with a per-user data key on the tracking, delivery and audiences topics, so that a deletion makes every copy unreadable; false: written plain (records sealed before stay readable) ([security.md](security.md#crypto-shredding))"`
}

// DataKeyring returns the master key of the data keys: DataEncryptionKey's keys, else
// ConfigEncryptionKey's; nil when both are empty.
func (s KafkaSettings) DataKeyring() (*schemas.Keyring, error) {
	if strings.TrimSpace(s.DataEncryptionKey) != "" {
		return schemas.ParseKeyringOf("DATA_ENCRYPTION_KEY", s.DataEncryptionKey)
	}
	return s.ConfigKeyring()
}

// ConfigKeyring returns the keys of ConfigEncryptionKey; nil when it is empty.
func (s KafkaSettings) ConfigKeyring() (*schemas.Keyring, error) {
	return schemas.ParseKeyring(s.ConfigEncryptionKey)
}

// DefaultKafkaSettings returns the defaults of docs/configuration.md#run-time-settings: no
// broker, the broker's replication factor, 6 partitions.
func DefaultKafkaSettings() KafkaSettings {
	return KafkaSettings{ReplicationFactor: -1, Partitions: 6, ShredEvents: true}
}

// LoadKafkaSettings reads KafkaSettings from the process environment and validates them,
// except that Brokers may be empty: an empty KAFKA_BROKERS means "start the embedded broker"
// to `make run`. A service that needs a real cluster gets the error naming KAFKA_BROKERS from
// ClientOpts, NewKafkaClient or Validate.
func LoadKafkaSettings() (KafkaSettings, error) {
	s, err := ParseKafkaSettings(nil)
	if err != nil {
		return s, err
	}
	return s, s.validate(false)
}

// ParseKafkaSettings reads KafkaSettings from environ (variable name to value), or from the
// process environment when environ is nil, on top of DefaultKafkaSettings (FromEnv), without
// validating them. It fails only when a variable does not parse (KAFKA_TLS=maybe,
// KAFKA_PARTITIONS=six).
func ParseKafkaSettings(environ map[string]string) (KafkaSettings, error) {
	s := DefaultKafkaSettings()
	if err := FromEnv(&s, environ); err != nil {
		return s, err
	}
	s.SASLMechanism = strings.ToUpper(s.SASLMechanism)
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
	if _, err := s.ConfigKeyring(); err != nil {
		errs = append(errs, err)
	}
	if strings.TrimSpace(s.DataEncryptionKey) != "" {
		if _, err := s.DataKeyring(); err != nil {
			errs = append(errs, err)
		}
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

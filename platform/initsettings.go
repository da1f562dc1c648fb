package platform

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// InitSettings are the settings of tributary-init, the one-shot bootstrap that creates the
// topics and applies the tenant config (docs/operations.md#topics-and-partitions). Start from
// DefaultInitSettings; InitSettingsFromEnv reads the environment
// (docs/configuration.md#run-time-settings).
type InitSettings struct {
	// Kafka is the cluster to prepare (KAFKA_*); brokers are required.
	Kafka KafkaSettings `env:"-"`
	// ConfigFile is the tenant config to apply (CONFIG_FILE); empty: topics only.
	ConfigFile string `env:"CONFIG_FILE"`
	// RetrySchedule gives the retry tier topics to create, one per distinct delay
	// (RETRY_SCHEDULE); it must be the deliverer's.
	RetrySchedule []time.Duration `env:"RETRY_SCHEDULE"`
	// Timeout is how long to keep trying while the cluster does not answer (INIT_TIMEOUT).
	Timeout time.Duration `env:"INIT_TIMEOUT" doc:"how long tributary-init keeps trying while Kafka does not answer"`
	// LogLevel is the level of the logs (LOG_LEVEL).
	LogLevel string `env:"LOG_LEVEL"`
	// AuditRetention is how long tributary.audit keeps its records (AUDIT_RETENTION;
	// docs/operations.md#audit-retention), set when the topic is created.
	AuditRetention time.Duration `env:"AUDIT_RETENTION" doc:"how long the audit trail ('tributary.audit') keeps its records, set when tributary-init creates the topic; change it later with 'kafka-configs' ([operations.md](operations.md#audit-retention))"`
}

// DefaultInitSettings returns the defaults: no broker, schemas.DefaultRetrySchedule, five
// minutes, level info.
func DefaultInitSettings() InitSettings {
	return InitSettings{
		Kafka:          DefaultKafkaSettings(),
		RetrySchedule:  schemas.DefaultRetryDelays(),
		Timeout:        5 * time.Minute,
		LogLevel:       DefaultCommandSettings().LogLevel,
		AuditRetention: RetentionAudit,
	}
}

// InitSettingsFromEnv returns DefaultInitSettings with the process environment applied
// (FromEnv), validated.
func InitSettingsFromEnv() (InitSettings, error) { return InitSettingsFromEnviron(nil) }

// InitSettingsFromEnviron is InitSettingsFromEnv reading environ instead of the process
// environment (nil: the process environment). It returns every problem.
func InitSettingsFromEnviron(environ map[string]string) (InitSettings, error) {
	defaults := DefaultInitSettings()
	kafka, kafkaErr := ParseKafkaSettings(environ) // Kafka is env:"-": read on its own
	defaults.Kafka = kafka
	s, err := LoadSettings(defaults, environ, ParseWith(schemas.ParseRetrySchedule))
	return s, errors.Join(kafkaErr, err)
}

// Validate returns every unusable setting, each naming its variable.
func (s InitSettings) Validate() error {
	errs := []error{s.Kafka.Validate(), schemas.ValidateRetryDelays(s.RetrySchedule)}
	if s.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("INIT_TIMEOUT: must be positive, got %s", s.Timeout))
	}
	if s.AuditRetention < time.Hour {
		errs = append(errs, fmt.Errorf("AUDIT_RETENTION: must be at least 1h, got %s", s.AuditRetention))
	}
	if _, err := NewLogger(s.LogLevel, io.Discard); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

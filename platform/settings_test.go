package platform_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

func TestParseKafkaSettingsDefaults(t *testing.T) {
	s, err := platform.ParseKafkaSettings(map[string]string{"KAFKA_BROKERS": " a:9092, b:9093 ,"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a:9092", "b:9093"}; !slices.Equal(s.Brokers, want) {
		t.Errorf("Brokers = %q, want %q", s.Brokers, want)
	}
	if s.ReplicationFactor != -1 || s.Partitions != 6 || s.TLS || s.SASLMechanism != "" {
		t.Errorf("defaults = %+v", s)
	}
	if err := s.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// TestParseKafkaSettings: the variables are read as they are, not validated (a bad broker
// address is Validate's); only a value that does not parse is an error.
func TestParseKafkaSettings(t *testing.T) {
	s := servicetest.Settings[platform.KafkaSettings]{
		FromEnviron: platform.ParseKafkaSettings,
		Required:    map[string]string{"KAFKA_BROKERS": "a:1"},
		Default:     platform.DefaultKafkaSettings(),
		Every: map[string]string{
			"KAFKA_BROKERS":            "kafka:9093",
			"KAFKA_SASL_MECHANISM":     "scram-sha-512",
			"KAFKA_SASL_USERNAME":      "svc",
			"KAFKA_SASL_PASSWORD":      "pw",
			"KAFKA_TLS":                "true",
			"KAFKA_TLS_CA_FILE":        "/etc/ca.pem",
			"KAFKA_REPLICATION_FACTOR": "3",
			"KAFKA_PARTITIONS":         "12",
			"DATA_ENCRYPTION_KEY":      "m1:key",
			"SHRED_EVENTS":             "false",
		},
		Want: func(s *platform.KafkaSettings) {
			*s = platform.KafkaSettings{
				Brokers: []string{"kafka:9093"}, SASLMechanism: platform.SASLScramSHA512, SASLUsername: "svc",
				SASLPassword: "pw", TLS: true, TLSCAFile: "/etc/ca.pem", ReplicationFactor: 3, Partitions: 12,
				DataEncryptionKey: "m1:key",
			}
		},
		Bad: map[string][]string{
			"KAFKA_TLS":                {"maybe"}, // not a bool
			"KAFKA_PARTITIONS":         {"six"},   // not a number
			"KAFKA_REPLICATION_FACTOR": {"70000"}, // too big for int16
			"SHRED_EVENTS":             {"maybe"},
		},
	}
	s.Default.Brokers = []string{"a:1"}
	s.Run(t)
}

// key32 is a CONFIG_ENCRYPTION_KEY key: 32 bytes in base64.
const key32 = "Kr0bI9l1m0nKs8Qv3Zp7xW2yT6uA4cE8gH1jL5nP9rQ="

func TestKafkaSettingsValidate(t *testing.T) {
	valid := platform.KafkaSettings{Brokers: []string{"localhost:9092"}, ReplicationFactor: -1, Partitions: 6}
	tests := []struct {
		name   string
		modify func(*platform.KafkaSettings)
		want   string // the variable the error must name; "" for valid settings
	}{
		{"valid", func(*platform.KafkaSettings) {}, ""},
		{"valid scram", func(s *platform.KafkaSettings) {
			s.SASLMechanism, s.SASLUsername, s.SASLPassword = platform.SASLScramSHA256, "u", "p"
		}, ""},
		{"valid tls with ca", func(s *platform.KafkaSettings) { s.TLS, s.TLSCAFile = true, "ca.pem" }, ""},
		{"replication factor 3", func(s *platform.KafkaSettings) { s.ReplicationFactor = 3 }, ""},
		{"no brokers", func(s *platform.KafkaSettings) { s.Brokers = nil }, "KAFKA_BROKERS"},
		{"broker without port", func(s *platform.KafkaSettings) { s.Brokers = []string{"localhost"} }, "KAFKA_BROKERS"},
		{"broker with bad port", func(s *platform.KafkaSettings) { s.Brokers = []string{"h:99999"} }, "KAFKA_BROKERS"},
		{"broker without host", func(s *platform.KafkaSettings) { s.Brokers = []string{":9092"} }, "KAFKA_BROKERS"},
		{"unknown mechanism", func(s *platform.KafkaSettings) { s.SASLMechanism = "GSSAPI" }, "KAFKA_SASL_MECHANISM"},
		{"mechanism without user", func(s *platform.KafkaSettings) {
			s.SASLMechanism, s.SASLPassword = platform.SASLPlain, "p"
		}, "KAFKA_SASL_USERNAME"},
		{"mechanism without password", func(s *platform.KafkaSettings) {
			s.SASLMechanism, s.SASLUsername = platform.SASLPlain, "u"
		}, "KAFKA_SASL_PASSWORD"},
		{"user without mechanism", func(s *platform.KafkaSettings) { s.SASLUsername = "u" }, "KAFKA_SASL_MECHANISM"},
		{"ca file without tls", func(s *platform.KafkaSettings) { s.TLSCAFile = "ca.pem" }, "KAFKA_TLS_CA_FILE"},
		{"replication factor 0", func(s *platform.KafkaSettings) { s.ReplicationFactor = 0 }, "KAFKA_REPLICATION_FACTOR"},
		{"replication factor -2", func(s *platform.KafkaSettings) { s.ReplicationFactor = -2 }, "KAFKA_REPLICATION_FACTOR"},
		{"partitions 0", func(s *platform.KafkaSettings) { s.Partitions = 0 }, "KAFKA_PARTITIONS"},
		{"encryption keys", func(s *platform.KafkaSettings) { s.ConfigEncryptionKey = "k2:" + key32 + ",k1:" + key32 }, ""},
		{"encryption key of 16 bytes", func(s *platform.KafkaSettings) { s.ConfigEncryptionKey = "k1:" + key32[:24] }, "CONFIG_ENCRYPTION_KEY"},
		{"encryption key not base64", func(s *platform.KafkaSettings) { s.ConfigEncryptionKey = "k1:" + key32[:43] + "!" }, "CONFIG_ENCRYPTION_KEY"},
		{"encryption key without id", func(s *platform.KafkaSettings) { s.ConfigEncryptionKey = key32 }, "CONFIG_ENCRYPTION_KEY"},
		{"encryption key id twice", func(s *platform.KafkaSettings) { s.ConfigEncryptionKey = "k1:" + key32 + ",k1:" + key32 }, "CONFIG_ENCRYPTION_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := valid
			s.Brokers = slices.Clone(valid.Brokers)
			tt.modify(&s)
			err := s.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want+":")):
				t.Errorf("Validate = %v, want an error naming %s", err, tt.want)
			}
			if err != nil && s.SASLPassword != "" && strings.Contains(err.Error(), s.SASLPassword) {
				t.Errorf("error shows the password: %v", err)
			}
			if err != nil && strings.Contains(err.Error(), key32[:20]) {
				t.Errorf("error shows the encryption key: %v", err)
			}
		})
	}
}

func TestClientOpts(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := platform.KafkaSettings{Brokers: []string{"localhost:9092"}, ReplicationFactor: -1, Partitions: 1}
	tests := []struct {
		name    string
		modify  func(*platform.KafkaSettings)
		wantErr string
		nOpts   int
	}{
		// Seed brokers and the bounded fetch, then SASL and TLS.
		{"plain text", func(*platform.KafkaSettings) {}, "", 2},
		{"sasl plain", func(s *platform.KafkaSettings) {
			s.SASLMechanism, s.SASLUsername, s.SASLPassword = platform.SASLPlain, "u", "p"
		}, "", 3},
		{"scram 256 over tls", func(s *platform.KafkaSettings) {
			s.SASLMechanism, s.SASLUsername, s.SASLPassword, s.TLS = platform.SASLScramSHA256, "u", "p", true
		}, "", 4},
		{"scram 512", func(s *platform.KafkaSettings) {
			s.SASLMechanism, s.SASLUsername, s.SASLPassword = platform.SASLScramSHA512, "u", "p"
		}, "", 3},
		{"missing ca file", func(s *platform.KafkaSettings) { s.TLS, s.TLSCAFile = true, filepath.Join(dir, "none.pem") }, "KAFKA_TLS_CA_FILE", 0},
		{"ca file without certificates", func(s *platform.KafkaSettings) { s.TLS, s.TLSCAFile = true, notPEM }, "KAFKA_TLS_CA_FILE", 0},
		{"invalid settings", func(s *platform.KafkaSettings) { s.Brokers = nil }, "KAFKA_BROKERS", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			tt.modify(&s)
			opts, err := s.ClientOpts()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("ClientOpts error = %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ClientOpts: %v", err)
			}
			if len(opts) != tt.nOpts {
				t.Errorf("%d options, want %d", len(opts), tt.nOpts)
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if got := cl.OptValue(kgo.FetchMaxBytes); got != int32(platform.FetchMaxBytes) {
				t.Errorf("fetch max bytes %v, want %d (a backlog stays in Kafka, not in read-ahead)", got, platform.FetchMaxBytes)
			}
		})
	}
}

func TestDefaultTopicsRetryTiers(t *testing.T) {
	schedule, err := schemas.ParseRetrySchedule(schemas.DefaultRetrySchedule)
	if err != nil {
		t.Fatal(err)
	}
	var tiers []string
	names := map[string]bool{}
	for _, s := range platform.DefaultTopics(6, schedule) {
		if names[s.Name] {
			t.Errorf("topic %s listed twice", s.Name)
		}
		names[s.Name] = true
		if strings.HasPrefix(s.Name, schemas.RetryTopicPrefix) {
			tiers = append(tiers, s.Name)
			if s.Retention != 7*24*time.Hour || s.Compact || s.Partitions != 6 {
				t.Errorf("tier %+v", s)
			}
		}
	}
	want := []string{"webhooks.retry.10s", "webhooks.retry.1m", "webhooks.retry.5m", "webhooks.retry.15m", "webhooks.retry.30m", "webhooks.retry.1h"}
	if !slices.Equal(tiers, want) {
		t.Errorf("tiers = %q, want %q", tiers, want)
	}
}

func TestTopicSpecConfigs(t *testing.T) {
	tests := []struct {
		spec          platform.TopicSpec
		policy, retMS string // retMS "" means not set
	}{
		{platform.TopicSpec{Name: "a", Compact: true, Retention: time.Hour}, "compact", ""},
		{platform.TopicSpec{Name: "b"}, "delete", ""},
		{platform.TopicSpec{Name: "c", Retention: -1}, "delete", "-1"},
		{platform.TopicSpec{Name: "d", Retention: 90 * time.Second}, "delete", "90000"},
		{platform.TopicSpec{Name: "e", Compact: true, AlsoDelete: true, Retention: 24 * time.Hour}, "compact,delete", "86400000"},
		{platform.TopicSpec{Name: "f", Compact: true, AlsoDelete: true}, "compact", ""},
	}
	for _, tt := range tests {
		t.Run(tt.spec.Name, func(t *testing.T) {
			cfg := tt.spec.Configs()
			if got := *cfg["cleanup.policy"]; got != tt.policy {
				t.Errorf("cleanup.policy = %s, want %s", got, tt.policy)
			}
			got, ok := cfg["retention.ms"]
			switch {
			case tt.retMS == "" && ok:
				t.Errorf("retention.ms = %s, want unset", *got)
			case tt.retMS != "" && (!ok || *got != tt.retMS):
				t.Errorf("retention.ms = %v, want %s", got, tt.retMS)
			}
		})
	}
}

// audiences.state is created with the compaction settings that make a deleted profile's
// earlier versions go within hours (docs/topics.md#audiencesstate); a topic deleting by age
// gets none of them.
func TestAudiencesStateCompaction(t *testing.T) {
	var state platform.TopicSpec
	for _, s := range platform.DefaultTopics(3, nil) {
		if s.Name == schemas.TopicAudiencesState {
			state = s
		}
	}
	cfg := state.Configs()
	for k, want := range map[string]string{"cleanup.policy": "compact", "segment.ms": "3600000", "max.compaction.lag.ms": "3600000",
		"min.cleanable.dirty.ratio": "0.1", "delete.retention.ms": "3600000"} {
		if got := cfg[k]; got == nil || *got != want {
			t.Errorf("audiences.state %s = %v, want %s", k, got, want)
		}
	}
	del := platform.TopicSpec{Name: "x", Retention: time.Hour, MaxCompactionLag: time.Hour, DeleteRetention: time.Hour, MinCleanableDirtyRatio: 0.1}.Configs()
	for _, k := range []string{"max.compaction.lag.ms", "delete.retention.ms", "min.cleanable.dirty.ratio"} {
		if v, ok := del[k]; ok {
			t.Errorf("a topic deleting by age: %s = %s, want unset", k, *v)
		}
	}
}

func TestLoadKafkaSettings(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string // the variable the error names; "" for none
	}{
		{"empty brokers are allowed (embedded broker)", map[string]string{}, ""},
		{"brokers", map[string]string{"KAFKA_BROKERS": "k:9092"}, ""},
		{"bad broker", map[string]string{"KAFKA_BROKERS": "k"}, "KAFKA_BROKERS"},
		{"bad mechanism without brokers", map[string]string{"KAFKA_SASL_MECHANISM": "X"}, "KAFKA_SASL_MECHANISM"},
		{"unparsable value", map[string]string{"KAFKA_PARTITIONS": "x"}, "KAFKA_PARTITIONS"},
	}
	vars := []string{"KAFKA_BROKERS", "KAFKA_SASL_MECHANISM", "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD",
		"KAFKA_TLS", "KAFKA_TLS_CA_FILE", "KAFKA_REPLICATION_FACTOR", "KAFKA_PARTITIONS"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, v := range vars {
				t.Setenv(v, tt.env[v])
				if _, ok := tt.env[v]; !ok {
					os.Unsetenv(v)
				}
			}
			s, err := platform.LoadKafkaSettings()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("LoadKafkaSettings = %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("LoadKafkaSettings = %v, want an error naming %s", err, tt.wantErr)
			}
			if err == nil && len(s.Brokers) == 0 {
				if _, err := s.ClientOpts(); err == nil || !strings.Contains(err.Error(), "KAFKA_BROKERS") {
					t.Errorf("ClientOpts without brokers = %v, want an error naming KAFKA_BROKERS", err)
				}
			}
		})
	}
}

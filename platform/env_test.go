package platform_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// envSample has a field of every kind the services' settings use.
type envSample struct {
	Name     string          `env:"S_NAME"`
	Secret   string          `env:"S_SECRET" secret:"true"`
	On       bool            `env:"S_ON"`
	Count    int             `env:"S_COUNT"`
	Small    int16           `env:"S_SMALL"`
	Wait     time.Duration   `env:"S_WAIT"`
	List     []string        `env:"S_LIST"`
	Schedule []time.Duration `env:"S_SCHEDULE"`
	Nested   struct {
		Inner string `env:"S_INNER"`
	}
	Skipped struct {
		Inner string `env:"S_SKIPPED"`
	} `env:"-"`
	Topic string // not a setting
}

func sampleDefaults() envSample {
	s := envSample{Name: "n", Secret: "s", On: true, Count: 3, Small: -1, Wait: time.Second,
		List: []string{"a"}, Schedule: []time.Duration{time.Minute}, Topic: "t"}
	s.Nested.Inner, s.Skipped.Inner = "i", "k"
	return s
}

func TestFromEnvAppliesOnDefaults(t *testing.T) {
	for _, tt := range []struct {
		name    string
		environ map[string]string
		want    func(*envSample)
	}{
		{"no variable keeps every default", map[string]string{}, func(*envSample) {}},
		{"empty and blank variables keep the default", map[string]string{
			"S_NAME": "", "S_SECRET": "  ", "S_ON": "", "S_COUNT": " ", "S_WAIT": "\t", "S_LIST": "", "S_SCHEDULE": " ",
		}, func(*envSample) {}},
		{"every variable", map[string]string{
			"S_NAME": " x ", "S_SECRET": " p w ", "S_ON": "false", "S_COUNT": " 7", "S_SMALL": "12", "S_WAIT": "1m30s",
			"S_LIST": " b, ,c ,", "S_SCHEDULE": "1s, 2s", "S_INNER": "j", "S_SKIPPED": "no", "TOPIC": "no",
		}, func(s *envSample) {
			s.Name, s.Secret, s.On, s.Count, s.Small, s.Wait = "x", " p w ", false, 7, 12, 90*time.Second
			s.List, s.Schedule, s.Nested.Inner = []string{"b", "c"}, []time.Duration{time.Second, 2 * time.Second}, "j"
		}},
		{"a list of only commas is empty", map[string]string{"S_LIST": ", ,"}, func(s *envSample) { s.List = nil }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := sampleDefaults()
			if err := platform.FromEnv(&got, tt.environ, platform.ParseWith(schemas.ParseRetrySchedule)); err != nil {
				t.Fatal(err)
			}
			want := sampleDefaults()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestFromEnvNamesTheVariable(t *testing.T) {
	for _, tt := range []struct{ variable, value, says string }{
		{"S_ON", "maybe", `"maybe" is not a boolean`},
		{"S_COUNT", "six", `"six" is not an integer`},
		{"S_SMALL", "70000", `"70000" is out of range`},
		{"S_WAIT", "soon", `invalid duration`},
		{"S_SCHEDULE", "1s,-2s", `entry 2 "-2s": must be positive`},
	} {
		t.Run(tt.variable, func(t *testing.T) {
			s := sampleDefaults()
			err := platform.FromEnv(&s, map[string]string{tt.variable: tt.value}, platform.ParseWith(schemas.ParseRetrySchedule))
			if err == nil || !strings.HasPrefix(err.Error(), tt.variable+": ") || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("error = %v, want %q naming %s", err, tt.says, tt.variable)
			}
			if strings.Count(err.Error(), tt.variable) != 1 {
				t.Errorf("error = %v, names %s more than once", err, tt.variable)
			}
		})
	}
	s := sampleDefaults()
	err := platform.FromEnv(&s, map[string]string{"S_ON": "x", "S_COUNT": "y", "S_WAIT": "z"})
	servicetest.NamesEach(t, err, "S_ON", "S_COUNT", "S_WAIT")
}

func TestEnvFields(t *testing.T) {
	var got []string
	for _, f := range platform.EnvFields(reflect.TypeFor[envSample]()) {
		got = append(got, f.Variable)
	}
	want := []string{"S_NAME", "S_SECRET", "S_ON", "S_COUNT", "S_SMALL", "S_WAIT", "S_LIST", "S_SCHEDULE", "S_INNER"}
	if !slices.Equal(got, want) {
		t.Errorf("EnvFields = %q, want %q", got, want)
	}
}

func TestKafkaSettingsFromNoEnvironmentAreTheDefaults(t *testing.T) {
	s, err := platform.ParseKafkaSettings(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, platform.DefaultKafkaSettings()) {
		t.Errorf("got %+v, want the defaults %+v", s, platform.DefaultKafkaSettings())
	}
}

func TestCommandSettings(t *testing.T) {
	servicetest.Settings[platform.CommandSettings]{
		FromEnviron: platform.CommandSettingsFromEnviron,
		Default:     platform.DefaultCommandSettings(),
		Every:       map[string]string{"LOG_LEVEL": "debug", "METRICS_ADDR": ":9", "SHUTDOWN_TIMEOUT": "30s"},
		Want: func(s *platform.CommandSettings) {
			*s = platform.CommandSettings{LogLevel: "debug", MetricsAddr: ":9", ShutdownTimeout: 30 * time.Second}
		},
		Bad: map[string][]string{
			"LOG_LEVEL":        {"loud"},
			"SHUTDOWN_TIMEOUT": {"0s", "-1s", "later"},
		},
	}.Run(t)
}

// TestInitSettings: KAFKA_BROKERS is required (tributary-init has no embedded broker).
func TestInitSettings(t *testing.T) {
	s := servicetest.Settings[platform.InitSettings]{
		FromEnviron: platform.InitSettingsFromEnviron,
		Required:    map[string]string{"KAFKA_BROKERS": "k:9092"},
		Default:     platform.DefaultInitSettings(),
		Every: map[string]string{"KAFKA_BROKERS": "k:9092", "CONFIG_FILE": " c.yaml ",
			"RETRY_SCHEDULE": "1s,1s", "INIT_TIMEOUT": "1m", "LOG_LEVEL": "warn"},
		Want: func(s *platform.InitSettings) {
			s.ConfigFile, s.RetrySchedule, s.Timeout, s.LogLevel = "c.yaml", []time.Duration{time.Second, time.Second}, time.Minute, "warn"
		},
		Bad: map[string][]string{
			"KAFKA_BROKERS":    {""},
			"INIT_TIMEOUT":     {"0s", "x"},
			"RETRY_SCHEDULE":   {"1s,0s"},
			"LOG_LEVEL":        {"4"},
			"KAFKA_PARTITIONS": {"0"},
		},
	}
	s.Default.Kafka.Brokers = []string{"k:9092"}
	s.Run(t)
	_, err := platform.InitSettingsFromEnviron(map[string]string{"INIT_TIMEOUT": "0s", "LOG_LEVEL": "loud"})
	servicetest.NamesEach(t, err, "KAFKA_BROKERS", "INIT_TIMEOUT", "LOG_LEVEL")
	if got, _ := schemas.ParseRetrySchedule(schemas.DefaultRetrySchedule); !slices.Equal(platform.DefaultInitSettings().RetrySchedule, got) {
		t.Errorf("RETRY_SCHEDULE default %v, want schemas.DefaultRetrySchedule", platform.DefaultInitSettings().RetrySchedule)
	}
}

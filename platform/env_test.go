package platform_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform"
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
	for _, v := range []string{"S_ON", "S_COUNT", "S_WAIT"} {
		if err == nil || !strings.Contains(err.Error(), v+": ") {
			t.Errorf("three bad variables: %v, want every one named (%s)", err, v)
		}
	}
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
	s, err := platform.CommandSettingsFromEnviron(map[string]string{})
	if err != nil || s != platform.DefaultCommandSettings() {
		t.Fatalf("no environment: %+v, %v; want the defaults %+v", s, err, platform.DefaultCommandSettings())
	}
	s, err = platform.CommandSettingsFromEnviron(map[string]string{"LOG_LEVEL": "debug", "METRICS_ADDR": ":9", "SHUTDOWN_TIMEOUT": "30s"})
	if want := (platform.CommandSettings{LogLevel: "debug", MetricsAddr: ":9", ShutdownTimeout: 30 * time.Second}); err != nil || s != want {
		t.Fatalf("got %+v, %v; want %+v", s, err, want)
	}
	for _, tt := range []struct{ variable, value string }{
		{"LOG_LEVEL", "loud"},
		{"SHUTDOWN_TIMEOUT", "0s"},
		{"SHUTDOWN_TIMEOUT", "-1s"},
		{"SHUTDOWN_TIMEOUT", "later"},
	} {
		t.Run(tt.variable+"="+tt.value, func(t *testing.T) {
			_, err := platform.CommandSettingsFromEnviron(map[string]string{tt.variable: tt.value})
			if err == nil || !strings.Contains(err.Error(), tt.variable+": ") {
				t.Errorf("error = %v, want one naming %s", err, tt.variable)
			}
		})
	}
}

func TestInitSettings(t *testing.T) {
	s, err := platform.InitSettingsFromEnviron(map[string]string{"KAFKA_BROKERS": "k:9092"})
	if err != nil {
		t.Fatal(err)
	}
	want := platform.DefaultInitSettings()
	want.Kafka.Brokers = []string{"k:9092"}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got %+v, want the defaults %+v", s, want)
	}
	if got, _ := schemas.ParseRetrySchedule(schemas.DefaultRetrySchedule); !slices.Equal(s.RetrySchedule, got) {
		t.Errorf("RETRY_SCHEDULE default %v, want schemas.DefaultRetrySchedule", s.RetrySchedule)
	}
	s, err = platform.InitSettingsFromEnviron(map[string]string{"KAFKA_BROKERS": "k:9092", "CONFIG_FILE": " c.yaml ",
		"RETRY_SCHEDULE": "1s,1s", "INIT_TIMEOUT": "1m", "LOG_LEVEL": "warn"})
	if err != nil || s.ConfigFile != "c.yaml" || len(s.RetrySchedule) != 2 || s.Timeout != time.Minute || s.LogLevel != "warn" {
		t.Fatalf("got %+v, %v", s, err)
	}
	for _, tt := range []struct {
		variable string
		environ  map[string]string
	}{
		{"KAFKA_BROKERS", map[string]string{}},
		{"INIT_TIMEOUT", map[string]string{"INIT_TIMEOUT": "0s"}},
		{"INIT_TIMEOUT", map[string]string{"INIT_TIMEOUT": "x"}},
		{"RETRY_SCHEDULE", map[string]string{"RETRY_SCHEDULE": "1s,0s"}},
		{"LOG_LEVEL", map[string]string{"LOG_LEVEL": "4"}},
		{"KAFKA_PARTITIONS", map[string]string{"KAFKA_PARTITIONS": "0"}},
	} {
		t.Run(tt.variable, func(t *testing.T) {
			if tt.environ["KAFKA_BROKERS"] == "" && tt.variable != "KAFKA_BROKERS" {
				tt.environ["KAFKA_BROKERS"] = "k:9092"
			}
			_, err := platform.InitSettingsFromEnviron(tt.environ)
			if err == nil || !strings.Contains(err.Error(), tt.variable+": ") {
				t.Errorf("error = %v, want one naming %s", err, tt.variable)
			}
		})
	}
	_, err = platform.InitSettingsFromEnviron(map[string]string{"INIT_TIMEOUT": "0s", "LOG_LEVEL": "loud"})
	var n int
	for _, v := range []string{"KAFKA_BROKERS", "INIT_TIMEOUT", "LOG_LEVEL"} {
		if err != nil && strings.Contains(err.Error(), v+": ") {
			n++
		}
	}
	if n != 3 {
		t.Errorf("three bad settings: %v, want each named", err)
	}
}

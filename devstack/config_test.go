package devstack_test

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/devstack"
	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestConfigFromEnviron: `make run` reads each service's settings as the service does
// (WEBHOOK_ALLOW_PRIVATE, as the Makefile sets it, and the others), and its own.
func TestConfigFromEnviron(t *testing.T) {
	servicetest.Settings[devstack.Config]{
		FromEnviron: devstack.ConfigFromEnviron,
		Default:     devstack.DefaultConfig(),
		Every: map[string]string{
			"KAFKA_BROKERS":          "k:9092",
			"INGEST_ADDR":            "127.0.0.1:0",
			"ROUTER_EXACTLY_ONCE":    "false",
			"RETRY_SCHEDULE":         "1s,2s",
			"DELIVERY_TIMEOUT":       "1s",
			"WEBHOOK_ALLOW_PRIVATE":  "true",
			"SHUTDOWN_TIMEOUT":       "2s",
			"EMBEDDED_KAFKA_PORT":    "0",
			"CONFIG_FILE":            "deploy/config/dev.yaml",
			"DATA_DIR":               "/tmp/d",
			"CONSOLE_ADDR":           ":1",
			"CONSOLE_AUDIENCES_URL":  "http://aud:1",
			"AUDIENCES_TOKEN":        "aud-token-0123456789",
			"AUDIENCE_SYNC_INTERVAL": "5m",
			"LOG_LEVEL":              "debug",
			"CONFIG_ENCRYPTION_KEY":  "k1:Kr0bI9l1m0nKs8Qv3Zp7xW2yT6uA4cE8gH1jL5nP9rQ=",
		},
		Want: func(c *devstack.Config) {
			c.Kafka.Brokers = []string{"k:9092"}
			c.Ingest.Addr, c.Ingest.ShutdownTimeout = "127.0.0.1:0", 2*time.Second
			c.Router.ExactlyOnce, c.Router.ShutdownTimeout = false, 2*time.Second
			c.Deliverer.RetrySchedule, c.Deliverer.Timeout = []time.Duration{time.Second, 2 * time.Second}, time.Second
			c.Deliverer.AllowPrivate, c.Deliverer.ShutdownTimeout = true, 2*time.Second
			c.EmbeddedPort, c.ConfigFile, c.DataDir, c.Console.Addr = 0, "deploy/config/dev.yaml", "/tmp/d", ":1"
			c.Console.ShutdownTimeout = 2 * time.Second
			c.Console.AudiencesURL, c.Console.AudiencesToken, c.Audiences.Token = "http://aud:1", "aud-token-0123456789", "aud-token-0123456789"
			c.Audiences.SyncInterval, c.Audiences.ShutdownTimeout, c.LogLevel = 5*time.Minute, 2*time.Second, "debug"
			c.Kafka.ConfigEncryptionKey = "k1:Kr0bI9l1m0nKs8Qv3Zp7xW2yT6uA4cE8gH1jL5nP9rQ="
		},
		Bad: map[string][]string{
			"KAFKA_BROKERS":              {"nohostport"},
			"KAFKA_PARTITIONS":           {"six"},
			"INGEST_PRODUCE_TIMEOUT":     {"0s"},
			"ROUTER_TRANSACTION_TIMEOUT": {"1ms"},
			"RETRY_SCHEDULE":             {"1s,x"},
			"RETRY_WINDOW":               {"0s"},
			"DELIVERY_TIMEOUT":           {"-1s"},
			"WEBHOOK_ALLOW_PRIVATE":      {"sure"},
			"SHUTDOWN_TIMEOUT":           {"0s"},
			"EMBEDDED_KAFKA_PORT":        {"70000", "port"},
			"AUDIENCE_SYNC_INTERVAL":     {"0s", "often"},
			"AUDIENCES_TOKEN":            {"short"},
			"CONSOLE_ALLOWED_HOSTS":      {"console.example.com:8090"},
			"LOG_LEVEL":                  {"loud"},
			"CONFIG_ENCRYPTION_KEY":      {"k1:c2l4dGVlbiBieXRlcyEhIQ==", "Kr0bI9l1m0nKs8Qv3Zp7xW2yT6uA4cE8gH1jL5nP9rQ="},
		},
		Unusable:      func(c *devstack.Config) { c.DataDir, c.Deliverer.RetryWindow, c.Ingest.Addr = "", 0, "" },
		Validate:      (*devstack.Config).Validate,
		UnusableNamed: []string{"DATA_DIR", "RETRY_WINDOW", "INGEST_ADDR"},
	}.Run(t)
}

// update rewrites the generated parts of the docs instead of comparing them:
//
//	go test ./devstack -run TestConfigDocUpToDate -update
var update = flag.Bool("update", false, "rewrite the settings table of "+devstack.ConfigDocPath)

// TestConfigDocUpToDate regenerates the settings table of docs/configuration.md from the
// settings structs and fails while the file differs (with -update it rewrites the file).
func TestConfigDocUpToDate(t *testing.T) {
	table, err := devstack.SettingsTable()
	if err != nil {
		t.Fatalf("the settings structs do not make a table: %v", err)
	}
	doc, err := os.ReadFile("../" + devstack.ConfigDocPath)
	if err != nil {
		t.Fatal(err)
	}
	want, err := devstack.ReplaceSettingsTable(string(doc), table)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("../"+devstack.ConfigDocPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(doc) != want {
		t.Fatalf("%s is out of date: run go test ./devstack -run TestConfigDocUpToDate -update", devstack.ConfigDocPath)
	}
}

// TestSettingsTableHasEverySetting: the table lists what `make run` and the services read, with
// the defaults of their DefaultConfig.
func TestSettingsTableHasEverySetting(t *testing.T) {
	settings, err := devstack.Settings()
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]devstack.Setting{}
	for _, s := range settings {
		rows[s.Variable] = s
	}
	for _, tt := range []struct{ variable, def, by string }{
		{"KAFKA_BROKERS", "", "ingest router deliverer audiences console tributary-init tributary"},
		{"EMBEDDED_KAFKA_PORT", "`9092`", "tributary"},
		{"DATA_DIR", "`.data`", "tributary"},
		{"CONFIG_FILE", "", "tributary-init tributary"},
		{"INIT_TIMEOUT", "`5m`", "tributary-init"},
		{"INGEST_ADDR", "`127.0.0.1:8080`", "ingest tributary"},
		{"ROUTER_TRANSACTIONAL_ID", "`tributary-router-<hostname>`", "router tributary"},
		{"RETRY_SCHEDULE", "`10s,1m,5m,15m,30m,1h,1h,1h`", "deliverer tributary-init tributary"},
		{"RETRY_WINDOW", "`4h`", "deliverer tributary"},
		{"SHUTDOWN_TIMEOUT", "`10s`", "ingest router deliverer audiences console tributary"},
		{"LOG_LEVEL", "`info`", "ingest router deliverer audiences console tributary-init tributary"},
		{"METRICS_ADDR", "ingest, audiences and console unset, router `127.0.0.1:9101`, deliverer `127.0.0.1:9102`", "ingest router deliverer audiences console"},
		{"AUDIENCE_SYNC_INTERVAL", "`1m`", "audiences tributary"},
		{"AUDIENCES_ADDR", "`127.0.0.1:8091`", "audiences tributary"},
		{"AUDIENCES_TRANSACTIONAL_ID", "`tributary-audiences-<hostname>`", "audiences tributary"},
		{"CONSOLE_ADDR", "`127.0.0.1:8090`", "console tributary"},
		{"CONSOLE_TOKEN", "required (`make run`: generated per `DATA_DIR`)", "console tributary"},
		{"CONSOLE_AUDIENCES_URL", "`http://127.0.0.1:8091`", "console tributary"},
		{"AUDIENCES_TOKEN", "required (`make run`: generated per `DATA_DIR`)", "audiences console tributary"},
	} {
		s, ok := rows[tt.variable]
		if !ok {
			t.Errorf("%s is not in the table", tt.variable)
			continue
		}
		if s.Default != tt.def || strings.Join(s.Commands, " ") != tt.by || s.Meaning == "" {
			t.Errorf("%s: %+v, want default %s read by %s", tt.variable, s, tt.def, tt.by)
		}
	}
}

// TestConfigFromEnvironReportsEveryProblemOnce: unparsable and unusable values of every part
// come together, and SHUTDOWN_TIMEOUT, read by every service, once.
func TestConfigFromEnvironReportsEveryProblemOnce(t *testing.T) {
	_, err := devstack.ConfigFromEnviron(map[string]string{
		"KAFKA_TLS": "maybe", "SHUTDOWN_TIMEOUT": "x", "ROUTER_EXACTLY_ONCE": "perhaps",
		"DELIVERER_MAX_PER_HOST": "0", "EMBEDDED_KAFKA_PORT": "-3",
	})
	servicetest.NamesEachOnce(t, err, "KAFKA_TLS", "SHUTDOWN_TIMEOUT", "ROUTER_EXACTLY_ONCE", "DELIVERER_MAX_PER_HOST", "EMBEDDED_KAFKA_PORT")
}

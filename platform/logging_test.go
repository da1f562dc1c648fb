package platform_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
)

func TestNewLoggerLevels(t *testing.T) {
	tests := []struct {
		level         string
		debug, info   bool // whether a debug and an info line come out
		warn, wantErr bool
	}{
		{level: "", info: true, warn: true},
		{level: "info", info: true, warn: true},
		{level: "DEBUG", debug: true, info: true, warn: true},
		{level: " warn ", warn: true},
		{level: "error"},
		{level: "disabled"},
		{level: "verbose", wantErr: true},
		{level: "4", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			var buf bytes.Buffer
			logger, err := platform.NewLogger(tt.level, &buf)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "LOG_LEVEL") {
					t.Fatalf("NewLogger(%q) error = %v, want one naming LOG_LEVEL", tt.level, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewLogger(%q): %v", tt.level, err)
			}
			logger.Debug().Msg("d")
			logger.Info().Msg("i")
			logger.Warn().Msg("w")
			out := buf.String()
			for msg, want := range map[string]bool{`"message":"d"`: tt.debug, `"message":"i"`: tt.info, `"message":"w"`: tt.warn} {
				if got := strings.Contains(out, msg); got != want {
					t.Errorf("level %q: line %s present = %v, want %v\n%s", tt.level, msg, got, want, out)
				}
			}
		})
	}
}

func TestNewLoggerJSONToFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if platform.IsTerminal(f) {
		t.Fatal("a regular file counts as a terminal")
	}
	logger, err := platform.NewLogger("info", f)
	if err != nil {
		t.Fatal(err)
	}
	logger.Info().Str("topic", "t").Dur("window", 4*time.Hour).Msg("hello")
	raw, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal(raw, &line); err != nil {
		t.Fatalf("not one JSON line: %q: %v", raw, err)
	}
	// Durations carry their unit (zerolog's default is a bare number of milliseconds).
	if line["level"] != "info" || line["message"] != "hello" || line["topic"] != "t" || line["time"] == nil || line["window"] != "4h0m0s" {
		t.Errorf("line = %v", line)
	}
}

func TestKgoLogger(t *testing.T) {
	var buf bytes.Buffer
	l := platform.NewKgoLogger(zerolog.New(&buf), kgo.LogLevelWarn)
	if l.Level() != kgo.LogLevelWarn {
		t.Errorf("Level = %v", l.Level())
	}
	l.Log(kgo.LogLevelWarn, "unable to dial", "broker", "1", "err", os.ErrDeadlineExceeded, "odd")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%q: %v", buf.String(), err)
	}
	want := map[string]any{"level": "warn", "message": "unable to dial", "broker": "1", "err": os.ErrDeadlineExceeded.Error(), "component": "kgo"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %v, want %v", k, line[k], v)
		}
	}
}

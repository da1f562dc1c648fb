package ingest

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestConfigFromEnvironWithoutVariablesIsDefaultConfig(t *testing.T) {
	c, err := ConfigFromEnviron(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if want := DefaultConfig(); !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}

func TestConfigFromEnvironReadsEverySetting(t *testing.T) {
	c, err := ConfigFromEnviron(map[string]string{
		"INGEST_ADDR":            ":9",
		"INGEST_TRUSTED_PROXIES": "10.0.0.0/8, 192.168.1.7 ,",
		"INGEST_PRODUCE_TIMEOUT": "2s",
		"INGEST_ALLOWED_ORIGINS": "https://a.example, https://b.example",
		"INGEST_DISABLE_INBOUND": "true",
		"INGEST_MAX_IN_FLIGHT":   "0",
		"SHUTDOWN_TIMEOUT":       "3s",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Addr, want.ProduceTimeout, want.DisableInbound, want.MaxInFlight, want.ShutdownTimeout = ":9", 2*time.Second, true, 0, 3*time.Second
	want.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32")}
	want.AllowedOrigins = []string{"https://a.example", "https://b.example"}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}

// TestConfigSettingErrorsNameTheVariable: every bad value, unparsable or unusable, is an
// error naming its variable, and several are all reported.
func TestConfigSettingErrorsNameTheVariable(t *testing.T) {
	for _, tt := range []struct{ variable, value string }{
		{"INGEST_TRUSTED_PROXIES", "10.0.0.0/8,nope"},
		{"INGEST_PRODUCE_TIMEOUT", "0s"},
		{"INGEST_PRODUCE_TIMEOUT", "-1s"},
		{"INGEST_PRODUCE_TIMEOUT", "soon"},
		{"INGEST_DISABLE_INBOUND", "maybe"},
		{"INGEST_MAX_IN_FLIGHT", "-1"},
		{"INGEST_MAX_IN_FLIGHT", "many"},
		{"SHUTDOWN_TIMEOUT", "0s"},
		{"SHUTDOWN_TIMEOUT", "x"},
	} {
		t.Run(tt.variable+"="+tt.value, func(t *testing.T) {
			_, err := ConfigFromEnviron(map[string]string{tt.variable: tt.value})
			if err == nil || !strings.Contains(err.Error(), tt.variable+": ") {
				t.Errorf("error = %v, want one naming %s", err, tt.variable)
			}
		})
	}
	c := DefaultConfig()
	c.Addr, c.ProduceTimeout, c.MaxInFlight, c.ShutdownTimeout = "", 0, -1, 0
	err := c.Validate()
	for _, v := range []string{"INGEST_ADDR", "INGEST_PRODUCE_TIMEOUT", "INGEST_MAX_IN_FLIGHT", "SHUTDOWN_TIMEOUT"} {
		if err == nil || !strings.Contains(err.Error(), v+": ") {
			t.Errorf("Validate = %v, want every problem, %s among them", err, v)
		}
	}
}

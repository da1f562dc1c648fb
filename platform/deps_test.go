package platform_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform"
)

// loadSample is a settings struct read by LoadSettings: its Validate records that it ran.
type loadSample struct {
	Addr    string        `env:"L_ADDR"`
	Workers int           `env:"L_WORKERS"`
	Wait    time.Duration `env:"L_WAIT"`
	Mode    mode          `env:"L_MODE"`

	validated *int
}

type mode string

func (s *loadSample) Validate() error {
	*s.validated++
	if s.Workers < 1 {
		return errors.New("L_WORKERS: must be at least 1")
	}
	return nil
}

func TestLoadSettings(t *testing.T) {
	defaults := func(calls *int) loadSample {
		return loadSample{Addr: ":80", Workers: 4, Wait: time.Second, Mode: "fast", validated: calls}
	}
	parseMode := platform.ParseWith(func(v string) (mode, error) {
		if v != "fast" && v != "slow" {
			return "", errors.New("L_MODE: must be fast or slow")
		}
		return mode(v), nil
	})
	t.Run("defaults", func(t *testing.T) {
		calls := 0
		got, err := platform.LoadSettings(defaults(&calls), map[string]string{"L_ADDR": " "}, parseMode)
		if err != nil {
			t.Fatal(err)
		}
		if got.Addr != ":80" || got.Workers != 4 || got.Wait != time.Second || got.Mode != "fast" {
			t.Errorf("got %+v, want the defaults", got)
		}
		if calls != 1 {
			t.Errorf("Validate called %d times, want once", calls)
		}
	})
	t.Run("environment over defaults", func(t *testing.T) {
		calls := 0
		got, err := platform.LoadSettings(defaults(&calls), map[string]string{"L_ADDR": " :81 ", "L_WORKERS": "2", "L_WAIT": "2m", "L_MODE": "slow"}, parseMode)
		if err != nil {
			t.Fatal(err)
		}
		if got.Addr != ":81" || got.Workers != 2 || got.Wait != 2*time.Minute || got.Mode != "slow" {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("a bad value names its variable and keeps the default", func(t *testing.T) {
		calls := 0
		got, err := platform.LoadSettings(defaults(&calls), map[string]string{"L_WORKERS": "four", "L_WAIT": "soon", "L_MODE": "medium"}, parseMode)
		for _, want := range []string{`L_WORKERS: "four" is not an integer`, "L_WAIT: ", "L_MODE: must be fast or slow"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v does not contain %q", err, want)
			}
		}
		if got.Workers != 4 || calls != 1 {
			t.Errorf("Workers %d (want the default 4), Validate called %d times (want once)", got.Workers, calls)
		}
	})
	t.Run("Validate's errors are returned", func(t *testing.T) {
		calls := 0
		_, err := platform.LoadSettings(defaults(&calls), map[string]string{"L_WORKERS": "0"}, parseMode)
		if err == nil || err.Error() != "L_WORKERS: must be at least 1" {
			t.Errorf("error %v, want Validate's", err)
		}
	})
}

// A scoped Health names its checks after its service, so that services sharing one Health
// (make run) do not replace each other's checks; its components, readiness and shutdown are
// the shared Health's.
func TestHealthScope(t *testing.T) {
	h := platform.NewHealth()
	failing := func(context.Context) error { return errors.New("broker down") }
	ok := func(context.Context) error { return nil }
	h.Scope("router").AddCheck("kafka", ok)
	deliverer := h.Scope("deliverer")
	deliverer.AddCheck("kafka", failing)
	deliverer.SetReady("deliverer thing", true)
	h.Scope("audiences").SetWarming("audiences state", false)

	healthy, report := h.Check(context.Background())
	if healthy {
		t.Error("healthy with the deliverer's check failing")
	}
	want := map[string]string{"router kafka": "ok", "deliverer kafka": "broker down", "deliverer thing": "ok"}
	if len(report.Checks) != len(want) {
		t.Errorf("checks %v, want %v", report.Checks, want)
	}
	for name, v := range want {
		if report.Checks[name] != v {
			t.Errorf("check %q = %q, want %q (all: %v)", name, report.Checks[name], v, report.Checks)
		}
	}
	if _, ready := deliverer.Ready(context.Background()); ready.Checks["audiences state"] != "not ready" {
		t.Errorf("the scoped Health's Ready does not see the shared components: %v", ready.Checks)
	}

	deliverer.SetShuttingDown()
	rec := httptest.NewRecorder()
	h.ReadyzHandler(false).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "shutting down") {
		t.Errorf("/readyz of the shared Health after a scoped SetShuttingDown: %d %s", rec.Code, rec.Body)
	}
}

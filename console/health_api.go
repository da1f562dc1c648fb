package console

import (
	"net/http"
	"slices"
	"time"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/schemas"
)

// The health of a destination's messages (docs/console.md#health): what GET
// /v1/destinations/{id}/stats adds to the attempts' counters (views.Health: each message
// counted once, by its outcome), and the delivery funnel of GET /v1/destinations/{id}/overview.

// statsWindow reads ?window=: 1h (one point per minute, the default) or 24h (per 10 minutes).
func statsWindow(r *http.Request) (name string, window, step time.Duration, err error) {
	switch v := r.URL.Query().Get("window"); v {
	case "", "1h":
		return "1h", time.Hour, time.Minute, nil
	case "24h":
		return "24h", 24 * time.Hour, 10 * time.Minute, nil
	default:
		return "", 0, 0, errInvalid("window", "window: must be 1h or 24h, got %q", v)
	}
}

// statsAnswer is the data of GET /v1/destinations/{id}/stats: the attempts' counters and the
// messages'.
type statsAnswer struct {
	stats
	views.HealthStats
}

// healthOf is the destination's messages over the last window, its URLs in the order of its
// webhooks (then the URLs it no longer has).
func (s *Service) healthOf(d *schemas.Destination, window time.Duration) views.HealthStats {
	st := s.health.Stats(d.ID, s.now(), window)
	slices.SortStableFunc(st.URLs, func(a, b views.URLStats) int {
		return urlIndex(d, a.URL, len(d.Settings.Webhooks)) - urlIndex(d, b.URL, len(d.Settings.Webhooks))
	})
	return st
}

// urlIndex is the index of the webhook whose URL the log shows as url (redacted), else none.
func urlIndex(d *schemas.Destination, url string, none int) int {
	for i, wh := range d.Settings.Webhooks {
		if wh.URL == url || schemas.RedactURL(wh.URL) == url {
			return i
		}
	}
	return none
}

// destinationOverview answers the destination's delivery funnel over ?window=1h or 24h:
// received from its sources, dropped before it (per reason), delivered on the first attempt,
// after retries, retrying, dead-lettered, with sample message ids per reason.
func (s *Service) destinationOverview(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, ok := s.deps.Store.Snapshot().DestinationByID(id); !ok {
		return errNotFound("no destination %q", id)
	}
	name, window, _, err := statsWindow(r)
	if err != nil {
		return err
	}
	out := s.health.Funnel(id, s.now(), window)
	out.Window = name
	writeData(w, http.StatusOK, out)
	return nil
}

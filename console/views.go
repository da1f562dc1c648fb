package console

import (
	"github.com/tributary-cdp/tributary/console/internal/views"
)

// The views' state lives in console/internal/views (each view's lock and fields are its own);
// this package wires a topic reader to each (the *_reader.go files: runView) and answers the
// API and the UI from their query methods (the *_api.go and ui_*.go files).

// The views' types, by the names the handlers and templates use.
type (
	attempt   = views.DeliveryAttempt
	stats     = views.Stats
	point     = views.Point
	eventView = views.EventView
	tierRow   = views.TierRow
	// pendingRecord is a message waiting in a retry tier (the pending view).
	pendingRecord = views.PendingRecord
	// regulationView is embedded in the deletions page's rows.
	regulationView = views.RegulationView
)

// statusFilters are the values of the delivery log's ?status= filter.
var statusFilters = views.StatusFilters

// viewsReady are closed once each view caught up with its topics (runView).
type viewsReady struct {
	attempts, events, regulations, dlq chan struct{}
	// pending is closed once the pending view caught up; the console's readiness does not
	// wait for it (the tier topics may not exist yet).
	pending chan struct{}
}

func newViewsReady() viewsReady {
	return viewsReady{attempts: make(chan struct{}), events: make(chan struct{}), regulations: make(chan struct{}), dlq: make(chan struct{}),
		pending: make(chan struct{})}
}

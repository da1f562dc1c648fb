package console

import (
	"net/http"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/schemas"
)

// The violations view (docs/console.md#violations): the console checks each call it reads on
// tracking.events against its source's tracking plan, with the plan the router uses
// (schemas.CompiledPlan, the same code), and counts what it finds. It needs no topic of its
// own and costs the router nothing; the price is that after a restart the view holds only what
// the console read again (CONSOLE_EVENTS_BACKFILL records per partition) and what came after.

// checksViolations reports whether checkViolations reads the source's events: it has a
// tracking plan with schemas.
func (s *Service) checksViolations(source string) bool {
	src, ok := s.deps.Store.Snapshot().SourceByID(source)
	return ok && src.TrackingPlan.HasSchemas()
}

// checkViolations records the violations of one accepted call of source (its record, opened).
func (s *Service) checkViolations(source string, r *kgo.Record) {
	snap := s.deps.Store.Snapshot()
	src, ok := snap.SourceByID(source)
	if !ok || !src.TrackingPlan.HasSchemas() {
		return
	}
	p, ok := snap.TrackingPlanByID(src.TrackingPlan.PlanID)
	if !ok || p.Compiled() == nil {
		return
	}
	v, err := schemas.DecodeRoutingView(r.Value)
	if err != nil {
		return
	}
	field := v.Properties
	if v.Type != schemas.TypeTrack {
		field = v.Traits
	}
	res, err := p.Compiled().CheckField(src.TrackingPlan, v.Type, v.Event, field, r.Value)
	if err != nil {
		return
	}
	vs := append(res.Violations, res.Common...)
	s.violations.Add(source, views.ViolationSample{MessageID: v.MessageID, Event: v.Event, Type: v.Type, At: r.Timestamp, Violations: vs})
}

// sourceViolations answers the source's violations of the last 24 hours.
func (s *Service) sourceViolations(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, ok := s.deps.Store.Snapshot().SourceByID(id); !ok {
		return errNotFound("no source %q", id)
	}
	writeData(w, http.StatusOK, s.violations.Of(id, s.now()))
	return nil
}

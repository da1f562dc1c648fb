package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/tributary-cdp/tributary/schemas"
	"github.com/tributary-cdp/tributary/schemas/fql"
)

// The filters' test-a-message endpoint: POST /v1/destinations/{id}/filters/test runs the
// destination's filters (docs/routing.md#destination-filters) on a message the caller gives,
// exactly as the router would, and answers which filter decided what and the body the
// destination would get. Nothing is written anywhere.

// filterTestRequest is the body of the endpoint.
type filterTestRequest struct {
	// Message is a Segment message as a client sends it.
	Message json.RawMessage `json:"message"`
	// SourceID, when set, applies only the filters of that source's messages; "": every filter.
	SourceID string `json:"sourceId,omitempty"`
}

// filterTestAnswer is what the filters decided.
type filterTestAnswer struct {
	Delivered bool `json:"delivered"`
	// DecidedBy names the filter that sampled the message out or dropped it; "" when delivered.
	DecidedBy string               `json:"decidedBy"`
	Steps     []schemas.FilterStep `json:"steps"`
	Body      json.RawMessage      `json:"body,omitempty"`
}

func (s *Service) testFilters(w http.ResponseWriter, r *http.Request) error {
	var req filterTestRequest
	if err := decodeJSON(w, r, &req, false); err != nil {
		return err
	}
	d, ok := s.deps.Store.Snapshot().DestinationByID(r.PathValue("id"))
	if !ok {
		return errNotFound("no destination %q", r.PathValue("id"))
	}
	out, err := runFilters(d, req)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, out)
	return nil
}

// runFilters decides req's message with d's filters.
func runFilters(d *schemas.Destination, req filterTestRequest) (*filterTestAnswer, error) {
	if len(req.Message) == 0 || string(req.Message) == "null" {
		return nil, errInvalid("message", "message is required: a Segment message such as {\"type\":\"track\",\"event\":\"Order Completed\"}")
	}
	if req.SourceID != "" && !slices.Contains(d.Sources, req.SourceID) {
		return nil, errInvalid("sourceId", "sourceId: %q is not one of the destination's sources", req.SourceID)
	}
	v, body, err := schemas.DecodeRoutingViewAppendBody(nil, req.Message)
	if err != nil {
		var de *schemas.DecodeError
		if errors.As(err, &de) {
			return nil, errInvalid("message", "message: %s", de.Msg)
		}
		return nil, errInvalid("message", "message: %s", err)
	}
	out := &filterTestAnswer{Delivered: true, Steps: []schemas.FilterStep{}}
	cf := schemas.CompileFilters(d)
	if cf == nil {
		out.Body = body
		return out, nil
	}
	var m fql.Message // the body, as the router reads it
	m.Reset(body)
	fd := cf.Decide(req.SourceID, v.MessageID, &m, &out.Steps)
	if fd.Dropped() {
		out.Delivered, out.DecidedBy = false, cf.Name(fd.DroppedBy)
		return out, nil
	}
	if fd.Rewrites != 0 {
		body = cf.AppendRewrittenFrom(nil, &m, fd)
	}
	out.Body = body
	return out, nil
}

package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// The filters' tester on a destination's Test tab (docs/console.md#destination-filters): paste a
// message, see which filter decided what and the body the destination would get. It runs what
// POST /v1/destinations/{id}/filters/test runs; nothing is sent, so the answer is rendered at
// once (no redirect).

// filtersBox is what the tester shows.
type filtersBox struct {
	Message string            // as typed
	Answer  *filterTestAnswer // nil before a test, or on an error
	Error   string
}

func (u *ui) testFiltersPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	data, err := u.destinationData(r.Context(), id, url.Values{"tab": {tabTest}})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	box := &filtersBox{Message: r.PostFormValue("message")}
	data.Filters = box
	status := http.StatusOK
	if !json.Valid([]byte(box.Message)) {
		var v any
		err := json.Unmarshal([]byte(box.Message), &v)
		box.Error, status = "The message is not valid JSON: "+strings.TrimPrefix(errMessage(err), "json: ")+".", http.StatusBadRequest
	} else if out, err := runFilters(data.D, filterTestRequest{Message: json.RawMessage(box.Message)}); err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			u.fail(w, r, err)
			return
		}
		box.Error, status = ae.Message, ae.Status
	} else {
		box.Answer = out
	}
	u.renderDestination(w, r, status, data, "")
}

func errMessage(err error) string {
	if err == nil {
		return "empty"
	}
	return err.Error()
}

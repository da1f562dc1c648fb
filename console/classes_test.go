package console_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestEveryErrorClassCountedByName: the stats count a failure of each of schemas.Classes under
// its own name, none as "other", and ?status= filters by each: a class the deliverer may write
// cannot be counted as "other" silently.
func TestEveryErrorClassCountedByName(t *testing.T) {
	h := newHarness(t, nil)
	now := time.Now().UTC()
	// Every class but filtered: the router's record of a message it dropped is no attempt
	// (TestFunnelCounts).
	classes := slices.DeleteFunc(schemas.Classes(), func(c schemas.ErrorClass) bool { return c == schemas.ClassFiltered })
	var recs []*kgo.Record
	for _, c := range classes {
		rec := schemas.AttemptRecord{DestinationID: "file-hooks", MessageID: "m-" + string(c), URL: "http://127.0.0.1:9/file", Attempt: 1,
			Status: 500, LatencyMs: 3, ErrorClass: c, Error: string(c) + ": failed", At: schemas.FormatTimestamp(now)}
		if c == schemas.ClassOK {
			rec.Status, rec.Error = 200, ""
		}
		v, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("file-hooks"), Value: v})
	}
	h.env.Produce(recs...)
	var data map[string]any
	servicetest.Eventually(t, 5*time.Second, "every attempt in the stats", func() bool {
		st := h.do(http.MethodGet, "/v1/destinations/file-hooks/stats?window=1h", nil)
		expect(t, st, http.StatusOK)
		data = st.Data(t)
		return data["attempts"] == float64(len(classes))
	})
	failures := data["failures"].(map[string]any)
	if data["successes"] != float64(1) || len(failures) != len(classes)-1 || failures["other"] != nil {
		t.Errorf("successes %v, failures by class %v: want 1 success and one failure of each other class, none as other", data["successes"], failures)
	}
	for _, c := range classes[1:] {
		if failures[string(c)] != float64(1) {
			t.Errorf("failures[%q] = %v, want 1", c, failures[string(c)])
		}
	}
	for _, c := range classes {
		r := h.do(http.MethodGet, "/v1/destinations/file-hooks/attempts?status="+string(c), nil)
		expect(t, r, http.StatusOK)
		if got := r.JSON(t)["data"].([]any); len(got) != 1 || got[0].(map[string]any)["errorClass"] != string(c) {
			t.Errorf("?status=%s: %s", c, r.Body)
		}
	}
}

// TestOpenAPIStatusFilterIsTheClasses: the ?status= values openapi.yaml lists for a
// destination's attempts are the console's filters, every error class of schemas.Classes among
// them but filtered.
func TestOpenAPIStatusFilterIsTheClasses(t *testing.T) {
	doc := oasLoad(t)
	op := doc.Paths.Find("/v1/destinations/{id}/attempts").Get
	p := op.Parameters.GetByInAndName("query", "status")
	if p == nil {
		t.Fatal("no status parameter in openapi.yaml")
	}
	var enum []string
	for _, v := range p.Schema.Value.Enum {
		enum = append(enum, v.(string))
	}
	want := []string{"success", "failure", "2xx", "3xx", "4xx", "5xx"}
	for _, c := range schemas.Classes() {
		if c != schemas.ClassFiltered { // no attempt: never in the delivery log
			want = append(want, string(c))
		}
	}
	want = append(want, "other")
	if !slices.Equal(enum, want) {
		t.Errorf("openapi.yaml's status values %v, want %v", enum, want)
	}
}

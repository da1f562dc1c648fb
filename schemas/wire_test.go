package schemas_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/tributary-cdp/tributary/schemas"
)

// The records and API bodies one service writes and another reads (docs/architecture.md): each
// is one type here, and each round-trips.

// TestClassesAreTheConstants: schemas.Classes is every ErrorClass constant of the package, each
// once, ClassOK first, and ErrorClassCount counts them: a class added as a constant but not to
// the list would be counted as "other" by the console.
func TestClassesAreTheConstants(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "attempts.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var consts []schemas.ErrorClass
	ast.Inspect(f, func(n ast.Node) bool {
		if spec, ok := n.(*ast.ValueSpec); ok {
			if id, ok := spec.Type.(*ast.Ident); ok && id.Name == "ErrorClass" {
				for _, v := range spec.Values {
					s, err := strconv.Unquote(v.(*ast.BasicLit).Value)
					if err != nil {
						t.Fatal(err)
					}
					consts = append(consts, schemas.ErrorClass(s))
				}
			}
		}
		return true
	})
	classes := schemas.Classes()
	if !slices.Equal(classes, consts) {
		t.Errorf("Classes() = %v, want the constants in their order %v", classes, consts)
	}
	if len(classes) != schemas.ErrorClassCount || classes[0] != schemas.ClassOK {
		t.Errorf("Classes() = %v: want %d classes, ok first", classes, schemas.ErrorClassCount)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(classes)))) != len(classes) {
		t.Errorf("Classes() = %v: a class repeats", classes)
	}
	classes[0] = "changed"
	if schemas.Classes()[0] != schemas.ClassOK {
		t.Error("Classes() returned the package's own slice")
	}
	var retryable []schemas.ErrorClass
	for _, c := range schemas.Classes() {
		if c.Retryable() {
			retryable = append(retryable, c)
		}
	}
	if want := []schemas.ErrorClass{schemas.ClassTimeout, schemas.ClassConnection, schemas.ClassStatus5xx, schemas.ClassStatus408, schemas.ClassStatus429}; !slices.Equal(retryable, want) {
		t.Errorf("retryable classes %v, want %v (docs/delivery.md#retry-tiers)", retryable, want)
	}
}

// strictRoundTrip encodes in, decodes it back refusing unknown members, and fails unless it
// gets in again.
func strictRoundTrip[T any](t *testing.T, in T) []byte {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var out T
	if err := dec.Decode(&out); err != nil || !reflect.DeepEqual(out, in) {
		t.Errorf("%T round trip: %+v (%v), want %+v\n%s", in, out, err, in, b)
	}
	return b
}

// TestAttemptRecordRoundTrip: a webhooks.attempts record as encoding/json writes it decodes back
// with DecodeAttemptRecord, optional members present or absent; a member of the wrong type is
// an error.
func TestAttemptRecordRoundTrip(t *testing.T) {
	full := schemas.AttemptRecord{DestinationID: "order-hooks", MessageID: "m-1", URL: "https://hooks.example.com/segment", Attempt: 2, Status: 503,
		LatencyMs: 12.4, ErrorClass: schemas.ClassStatus5xx, Error: "status_5xx: HTTP 503 from hooks.example.com:443", ConcurrencyLimit: 32,
		PausedForMs: 5000, Test: true, At: "2026-11-23T10:00:00.000Z"}
	newer := full
	newer.Type, newer.Event, newer.UserID, newer.AnonymousID, newer.ReceivedAt = "track", "Order Completed", "user-5", "a-9", "2026-11-23T09:59:59.871Z"
	newer.NextAttemptAt, newer.DeadLettered = "2026-11-23T10:00:10.000Z", "status_4xx"
	newer.ResponseHeaders, newer.ResponseBody = map[string]string{"Content-Type": "text/plain"}, "database unavailable"
	for _, in := range []schemas.AttemptRecord{full, newer, {DestinationID: "d", ErrorClass: schemas.ClassOK, At: "2026-11-23T10:00:00.000Z"}} {
		b := strictRoundTrip(t, in)
		if out, err := schemas.DecodeAttemptRecord(b); err != nil || !reflect.DeepEqual(out, in) {
			t.Errorf("DecodeAttemptRecord(%s) = %+v, %v; want %+v", b, out, err, in)
		}
	}
	// The example of docs/topics.md#webhooksattempts.
	doc := `{"destinationId":"order-hooks","messageId":"m-1","url":"https://hooks.example.com/segment",
 "attempt":2,"status":503,"latencyMs":12.4,"errorClass":"status_5xx",
 "error":"status_5xx: HTTP 503 from hooks.example.com:443","concurrencyLimit":32,
 "pausedForMs":5000,"at":"2026-11-23T10:00:00.000Z"}`
	want := full
	want.Test = false
	if out, err := schemas.DecodeAttemptRecord([]byte(doc)); err != nil || !reflect.DeepEqual(out, want) {
		t.Errorf("the documented record decodes to %+v, %v; want %+v", out, err, want)
	}
	// The newer members' example of docs/topics.md#webhooksattempts.
	doc = `{"destinationId":"order-hooks","messageId":"m-1","url":"https://hooks.example.com/segment",
 "attempt":1,"status":500,"latencyMs":8.1,"errorClass":"status_5xx",
 "error":"status_5xx: HTTP 500 from hooks.example.com:443","concurrencyLimit":32,
 "at":"2026-11-23T10:00:00.000Z","type":"track","event":"Order Completed","userId":"user-5",
 "anonymousId":"a-9","receivedAt":"2026-11-23T09:59:59.871Z","nextAttemptAt":"2026-11-23T10:00:10.000Z",
 "responseHeaders":{"Content-Type":"text/plain"},"responseBody":"database unavailable"}`
	want = newer
	want.Attempt, want.Status, want.LatencyMs, want.Error, want.PausedForMs, want.Test, want.DeadLettered = 1, 500, 8.1, "status_5xx: HTTP 500 from hooks.example.com:443", 0, false, ""
	if out, err := schemas.DecodeAttemptRecord([]byte(doc)); err != nil || !reflect.DeepEqual(out, want) {
		t.Errorf("the documented newer record decodes to %+v, %v; want %+v", out, err, want)
	}
	for _, bad := range []string{``, `{"attempt":"2"}`, `{"concurrencyLimit":1.5}`, `{"test":1}`, `{"responseHeaders":{"a":1}}`, `{"responseBody":5}`, `[]`} {
		if _, err := schemas.DecodeAttemptRecord([]byte(bad)); err == nil {
			t.Errorf("DecodeAttemptRecord(%s): no error", bad)
		}
	}
}

// TestReplayMarkRoundTrip: a webhooks.dlq.replayed record is written as docs/topics.md shows it
// (members in that order, url and supersededBy only when set) and decodes back; its key
// round-trips too.
func TestReplayMarkRoundTrip(t *testing.T) {
	m := schemas.ReplayMark{ReplayedAt: "2026-11-24T07:31:00.000Z", DestinationID: "order-hooks", MessageID: "m1"}
	if got, want := string(m.Record()), `{"replayedAt":"2026-11-24T07:31:00.000Z","destinationId":"order-hooks","messageId":"m1"}`; got != want {
		t.Errorf("Record() = %s, want %s", got, want)
	}
	full := m
	full.URL, full.SupersededBy = "https://xxxxx:xxxxx@other.example.com/in", "0:12"
	for _, in := range []schemas.ReplayMark{m, full} {
		strictRoundTrip(t, in)
		if out, err := schemas.DecodeReplayMark(in.Record()); err != nil || out != in {
			t.Errorf("DecodeReplayMark(%s) = %+v, %v; want %+v", in.Record(), out, err, in)
		}
	}
	for _, bad := range []string{``, `{"url":5}`, `null x`} {
		if _, err := schemas.DecodeReplayMark([]byte(bad)); err == nil {
			t.Errorf("DecodeReplayMark(%s): no error", bad)
		}
	}
	for _, k := range []struct {
		p int32
		o int64
	}{{0, 0}, {3, 12}, {2147483647, 9223372036854775807}} {
		key := schemas.ReplayMarkKey(k.p, k.o)
		if p, o, ok := schemas.ParseReplayMarkKey(key); !ok || p != k.p || o != k.o {
			t.Errorf("ParseReplayMarkKey(%q) = %d, %d, %v", key, p, o, ok)
		}
	}
	for _, bad := range []string{"", "3", "3:", ":12", "a:1", "1:b", "2147483648:1", "1:2:3"} {
		if _, _, ok := schemas.ParseReplayMarkKey(bad); ok {
			t.Errorf("ParseReplayMarkKey(%q) read a key", bad)
		}
	}
}

// TestProfileAPIRoundTrip: each request and answer of the profile API decodes back, with no
// member its reader does not know.
func TestProfileAPIRoundTrip(t *testing.T) {
	strictRoundTrip(t, schemas.ProfileView{UserID: "u1", AnonymousID: "a1", Traits: json.RawMessage(`{"plan":"pro"}`),
		ComputedTraits: map[string]json.RawMessage{"orders": json.RawMessage(`3`)}, Audiences: []schemas.AudienceRef{{ID: "big", Key: "big_spenders"}},
		FirstSeen: "2026-11-23T10:00:00.000Z", LastSeen: "2026-11-24T10:00:00.000Z", MergedIDs: []string{"a0"}})
	a := schemas.AudienceView{ID: "big", Name: "Big", Key: "big_spenders", Source: "web", Realtime: true, Members: 7,
		LastSyncAt: "2026-11-24T10:00:00.000Z", Partitions: 2, Total: 3, Partial: true}
	a.LastSync.Joins, a.LastSync.Leaves = 2, 1
	strictRoundTrip(t, a)
	strictRoundTrip(t, schemas.MembersPage{Data: []schemas.Member{{UserID: "u1"}, {AnonymousID: "a2"}}, Next: "c"})
	strictRoundTrip(t, schemas.PreviewRequest{Rule: json.RawMessage(`{"trait":{"key":"plan","op":"eq","value":"pro"}}`), Now: "2026-11-24T10:00:00.000Z"})
	strictRoundTrip(t, schemas.PreviewView{Count: 2, Profiles: 9, At: "2026-11-24T10:00:00.000Z", Partitions: 1, Total: 2, Partial: true, NewAggregate: true})
	strictRoundTrip(t, schemas.ProfileAPIError{Code: "not_found", Message: "no profile for this id"})
	// The console sends a preview's rule alone.
	if b, _ := json.Marshal(schemas.PreviewRequest{Rule: json.RawMessage(`{"a":1}`)}); string(b) != `{"rule":{"a":1}}` {
		t.Errorf("a preview request without now: %s", b)
	}
}

// TestFilteredRecordRoundTrip: the compact record the router writes for a message it dropped
// for a destination (AppendFilteredRecord) is an AttemptRecord of class filtered with its
// reason, every other member at its zero value, and holds no member the type lacks; a record
// without a reason (any older one) decodes with none.
func TestFilteredRecordRoundTrip(t *testing.T) {
	for _, reason := range schemas.FilterReasons() {
		b := schemas.AppendFilteredRecord(nil, "order-hooks", "m-\"1\"", reason, []byte("2026-11-27T10:00:00.000Z"))
		want := schemas.AttemptRecord{DestinationID: "order-hooks", MessageID: `m-"1"`, ErrorClass: schemas.ClassFiltered, Reason: reason,
			At: "2026-11-27T10:00:00.000Z"}
		out, err := schemas.DecodeAttemptRecord(b)
		if err != nil || !reflect.DeepEqual(out, want) {
			t.Errorf("DecodeAttemptRecord(%s) = %+v, %v; want %+v", b, out, err, want)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out); err != nil {
			t.Errorf("%s: %v", b, err)
		}
		if strictRoundTrip(t, want); reason == "" {
			t.Fatal("an empty reason")
		}
	}
	if out, err := schemas.DecodeAttemptRecord([]byte(`{"destinationId":"d","errorClass":"ok","at":"x"}`)); err != nil || out.Reason != "" {
		t.Errorf("a record without a reason: %+v, %v", out, err)
	}
	if schemas.ClassFiltered.Retryable() {
		t.Error("filtered is retryable")
	}
}

// TestFilterDropRecordNamesFilter: the record of a message a destination filter dropped
// (AppendFilterDropRecord) has the reason destination_filter and names the filter in the
// member filter (escaped as JSON); it holds no member the type lacks, and a record without
// the member (an older router's) decodes with no filter.
func TestFilterDropRecordNamesFilter(t *testing.T) {
	b := schemas.AppendFilterDropRecord(nil, "order-hooks", "m-1", `small "orders"`, []byte("2026-11-27T10:00:00.000Z"))
	want := schemas.AttemptRecord{DestinationID: "order-hooks", MessageID: "m-1", ErrorClass: schemas.ClassFiltered,
		Reason: schemas.FilterDestinationFilter, Filter: `small "orders"`, At: "2026-11-27T10:00:00.000Z"}
	out, err := schemas.DecodeAttemptRecord(b)
	if err != nil || !reflect.DeepEqual(out, want) {
		t.Fatalf("DecodeAttemptRecord(%s) = %+v, %v; want %+v", b, out, err, want)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Errorf("%s: %v", b, err)
	}
	strictRoundTrip(t, want)
	old := schemas.AppendFilteredRecord(nil, "order-hooks", "m-1", schemas.FilterDestinationFilter, []byte("2026-11-27T10:00:00.000Z"))
	if out, err := schemas.DecodeAttemptRecord(old); err != nil || out.Reason != schemas.FilterDestinationFilter || out.Filter != "" {
		t.Errorf("a record without a filter: %+v, %v", out, err)
	}
}

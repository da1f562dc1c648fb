package schemas

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDecodeDeletionRequest(t *testing.T) {
	r, at, err := DecodeDeletionRequest([]byte(`{"userId":"u1","kind":"SUPPRESS_WITH_DELETE","sourceIds":["web"],"requestId":"r1","requestedAt":"2026-01-02T03:04:05.678+01:00"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.UserID != "u1" || !r.Deletes() || !r.Suppresses() || r.SourceIDs[0] != "web" || r.RequestID != "r1" {
		t.Fatalf("decoded %+v", r)
	}
	if want := time.Date(2026, 1, 2, 2, 4, 5, 678e6, time.UTC); !at.Equal(want) {
		t.Fatalf("requestedAt = %v, want %v", at, want)
	}
	if r, _, err := DecodeDeletionRequest([]byte(`{"userId":"` + strings.Repeat("ü", MaxSubjectIDBytes/2) + `"}`)); err != nil || len(r.UserID) != MaxSubjectIDBytes {
		t.Fatalf("a %d-byte user id: %v", MaxSubjectIDBytes, err)
	}
	r, at, err = DecodeDeletionRequest([]byte(`{"userId":"u1"}`))
	if err != nil || r.Kind != KindDeleteOnly || !r.Deletes() || r.Suppresses() || !at.IsZero() {
		t.Fatalf("default kind: %+v %v %v", r, at, err)
	}
	for _, c := range []struct {
		kind     string
		del, sup bool
	}{
		{KindSuppressOnly, false, true}, {KindUnsuppress, false, false}, {KindDeleteOnly, true, false},
	} {
		r, _, err := DecodeDeletionRequest([]byte(`{"userId":"u","kind":"` + c.kind + `"}`))
		if err != nil || r.Deletes() != c.del || r.Suppresses() != c.sup {
			t.Errorf("%s: deletes=%v suppresses=%v err=%v", c.kind, r.Deletes(), r.Suppresses(), err)
		}
	}
	for in, want := range map[string]string{
		`{"kind":"DELETE_ONLY"}`:                                        "userId: must not be empty",
		`{"userId":"u","kind":"delete"}`:                                `kind: "delete" is not one of`,
		`{"userId":"u","sourceID":["web"]}`:                             `unknown field "sourceID"`,
		`{"userId":"u","requestedAt":"yesterday"}`:                      "requestedAt",
		`{"userId":"u\n2"}`:                                             "userId: must not contain control characters",
		`{"userId":"u\u0000"}`:                                          "userId: must not contain control characters",
		`{"userId":"u\u0085"}`:                                          "userId: must not contain control characters",
		`{"userId":"` + strings.Repeat("u", MaxSubjectIDBytes+1) + `"}`: "userId: at most 1024 bytes",
		`not json`:          "deletion request",
		`{"userId":"u"} {}`: "data after",
	} {
		if _, _, err := DecodeDeletionRequest([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to contain %q", in, err, want)
		}
	}
}

func TestIntegrationSetting(t *testing.T) {
	for _, c := range []struct {
		in, key string
		on, set bool
	}{
		{``, "All", false, false},
		{`{}`, "All", false, false},
		{`{"All":false}`, "All", false, true},
		{`{"All":true}`, "All", true, true},
		{`{"Webhooks":{"opt":1}}`, "Webhooks", true, true},
		{`{"Webhooks":null}`, "Webhooks", false, false},
		{`{"Webhooks":"yes"}`, "Webhooks", false, false},
		{`{"webhooks":false}`, "Webhooks", false, false},
		{`{"Web\u0068ooks":false}`, "Webhooks", false, true},
		{`{"Webhooks":true,"Webhooks":false}`, "Webhooks", false, true},
		{`[1]`, "All", false, false},
	} {
		on, set := IntegrationSetting([]byte(c.in), c.key)
		if on != c.on || set != c.set {
			t.Errorf("IntegrationSetting(%s, %q) = %v, %v; want %v, %v", c.in, c.key, on, set, c.on, c.set)
		}
	}
}

func TestDeletionStatusRoundTrip(t *testing.T) {
	s := DeletionStatus{RequestID: "r-42", UserID: "u1", Kind: KindSuppressOnly, ProcessedAt: "2026-03-04T05:06:07.891Z"}
	if got := string(s.Record()); got != `{"requestId":"r-42","userId":"u1","kind":"SUPPRESS_ONLY","notices":0,"processedAt":"2026-03-04T05:06:07.891Z"}` {
		t.Errorf("Record() = %s", got)
	}
	back, err := DecodeDeletionStatus(append(s.Record()[:len(s.Record())-1], `,"later":1}`...))
	if err != nil || back != s {
		t.Errorf("DecodeDeletionStatus = %+v, %v; want %+v (unknown fields ignored)", back, err, s)
	}
	for _, bad := range []string{`{"userId":"u1"}`, `[]`, `{`} {
		if _, err := DecodeDeletionStatus([]byte(bad)); err == nil {
			t.Errorf("DecodeDeletionStatus(%s): no error", bad)
		}
	}
}

// A tracking.deletions.status value is a store's DeletionReport (it has a "store") or the
// router's DeletionStatus, read as the router's report whose counts are its numbers (also
// those a later router adds) and true flags.
func TestDecodeDeletionStatusRecord(t *testing.T) {
	rep := DeletionReport{RequestID: "r1", UserID: "u1", Store: StoreAudiences, Kind: KindDeleteOnly,
		Counts: map[string]int64{CountProfiles: 1, CountRedirects: 2, CountTombstones: 3}, DoneAt: "2026-03-04T05:06:07.891Z"}
	got, st, err := DecodeDeletionStatusRecord(rep.Record())
	if err != nil || st != nil || !reflect.DeepEqual(got, rep) {
		t.Fatalf("report: %+v %v %v, want %+v", got, st, err, rep)
	}
	if k := DeletionReportKey("r1", StoreAudiences); k != "r1/audiences" {
		t.Errorf("key %q", k)
	}
	router := DeletionStatus{RequestID: "r1", UserID: "u1", Kind: KindSuppressWithDelete, Notices: 2, SuppressionWritten: true, ProcessedAt: "2026-03-04T05:06:07.891Z"}
	v := append(router.Record()[:len(router.Record())-1], `,"keysShredded":4}`...)
	got, st, err = DecodeDeletionStatusRecord(v)
	want := DeletionReport{RequestID: "r1", UserID: "u1", Store: StoreRouter, Kind: KindSuppressWithDelete,
		Counts: map[string]int64{"notices": 2, "suppressionWritten": 1, "keysShredded": 4}, DoneAt: router.ProcessedAt}
	if err != nil || st == nil || st.Notices != 2 || !reflect.DeepEqual(got, want) {
		t.Fatalf("router status: %+v %v %v, want %+v", got, st, err, want)
	}
	for _, bad := range []string{`{"store":"audiences","userId":"u"}`, `{"requestId":"r","store":""}`, `{"userId":"u"}`, `[]`} {
		if _, _, err := DecodeDeletionStatusRecord([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

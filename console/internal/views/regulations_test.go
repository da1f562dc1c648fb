package views

import (
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

func request(id, user string) schemas.DeletionRequest {
	return schemas.DeletionRequest{UserID: user, Kind: schemas.KindDeleteOnly, SourceIDs: []string{"web"}, RequestID: id}
}

// TestRegulationsQueries: a regulation is listed newest first once its request was read, pages,
// is FINISHED once every expected store reported on every subject, and what List and Get
// return is a copy; Drop forgets one.
func TestRegulationsQueries(t *testing.T) {
	l := NewRegulations([]string{"router"})
	l.Requested("r1", t0, request("r1", "u1"), request("r1", "u2"), request("r1", "u1"))
	l.Requested("r2", t0.Add(time.Minute), request("r2", "u3"))
	l.Reported(schemas.DeletionReport{RequestID: "early", UserID: "u", Store: "router"}, nil) // no request yet: not listed
	page, more := l.List(0, 1, 100)
	if len(page) != 1 || page[0].ID != "r2" || !more {
		t.Fatalf("first page: %+v, more %v", page, more)
	}
	page, more = l.List(1, 10, 1)
	if len(page) != 1 || page[0].ID != "r1" || more || page[0].SubjectsTotal != 2 || len(page[0].SubjectIDs) != 1 {
		t.Fatalf("second page: %+v, more %v", page, more)
	}
	if _, ok := l.Get("early", 10); ok {
		t.Fatal("a regulation without its request is found")
	}
	for _, user := range []string{"u1", "u2", "u2"} { // u2 twice: counted once
		l.Reported(schemas.DeletionReport{RequestID: "r1", UserID: user, Store: "router", Counts: map[string]int64{"notices": 1},
			DoneAt: schemas.FormatTimestamp(t0.Add(time.Second))}, &schemas.DeletionStatus{Notices: 1})
	}
	v, ok := l.Get("r1", 10)
	if !ok || v.OverallStatus != StatusFinished || v.SubjectsProcessed != 2 || v.NoticesSent != 2 || *v.FinishedAfterMs != 1000 ||
		v.Stores["router"].Counts["notices"] != 2 || !v.Stores["router"].Expected {
		t.Fatalf("r1: %+v", v)
	}
	v.SubjectIDs[0] = "changed"
	v.SourceIDs[0] = "changed"
	v.Stores["router"].Counts["notices"] = 99
	if again, _ := l.Get("r1", 10); again.SubjectIDs[0] != "u1" || again.SourceIDs[0] != "web" || again.Stores["router"].Counts["notices"] != 2 {
		t.Fatalf("changing Get's answer changed the view: %+v", again)
	}
	if v, _ := l.Get("r2", 10); v.OverallStatus != StatusRunning || v.FinishedAt != nil {
		t.Fatalf("r2: %+v", v)
	}
	l.Drop("r2")
	if _, ok := l.Get("r2", 10); ok {
		t.Fatal("a dropped regulation is found")
	}
	if page, _ := l.List(0, 10, 10); len(page) != 1 {
		t.Fatalf("after Drop: %+v", page)
	}
}

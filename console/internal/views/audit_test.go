package views_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestAuditWindowFiltersPages: the view keeps its last max records, newest first, filtered by
// actor, action (or its prefix), object and time, paged by offset.
func TestAuditWindowFiltersPages(t *testing.T) {
	v := views.NewAudit(5)
	base := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	for i := range 12 {
		action, actor := "source.update", "ana@example.com"
		if i%2 == 1 {
			action, actor = "destination.create", "console-token"
		}
		v.Add(int64(100+i), schemas.AuditRecord{ID: fmt.Sprint(i), Time: schemas.FormatTimestamp(base.Add(time.Duration(i) * time.Minute)),
			Action: action, Actor: schemas.AuditActor{Name: actor}, Object: schemas.AuditObject{Kind: strings.Split(action, ".")[0], ID: fmt.Sprint("o", i%3)}})
	}
	ids := func(recs []schemas.AuditRecord) string {
		var s []string
		for _, r := range recs {
			s = append(s, r.ID)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		name   string
		f      views.AuditFilter
		before int64
		limit  int
		want   string
		next   int64
	}{
		{"the window", views.AuditFilter{}, -1, 10, "11,10,9,8,7", -1},
		{"a page", views.AuditFilter{}, -1, 2, "11,10", 110},
		{"the next page", views.AuditFilter{}, 110, 2, "9,8", 108},
		{"an action", views.AuditFilter{Action: "source.update"}, -1, 10, "10,8", -1},
		{"a prefix", views.AuditFilter{Action: "destination."}, -1, 10, "11,9,7", -1},
		{"not a prefix without its dot", views.AuditFilter{Action: "destination"}, -1, 10, "", -1},
		{"an actor, any case", views.AuditFilter{Actor: "ANA@example.com"}, -1, 10, "10,8", -1},
		{"an object", views.AuditFilter{Kind: "destination", ID: "o0"}, -1, 10, "9", -1},
		{"since, until", views.AuditFilter{Since: base.Add(8 * time.Minute), Until: base.Add(10 * time.Minute)}, -1, 10, "9,8", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, next := v.Page(tc.f, tc.before, tc.limit)
			if ids(got) != tc.want || next != tc.next {
				t.Errorf("got %s next %d, want %s next %d", ids(got), next, tc.want, tc.next)
			}
		})
	}
	if v.Len() != 5 {
		t.Errorf("Len %d, want 5", v.Len())
	}
}

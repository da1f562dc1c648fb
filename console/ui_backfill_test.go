package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestUIAudienceBackfill: an audience being backfilled shows its progress (partitions done,
// events read, the time range) on its page and a badge in the list
// (docs/audiences.md#backfill); one that is done shows neither.
func TestUIAudienceBackfill(t *testing.T) {
	h, _ := audiencesHarness(t)
	b := h.signIn(t)
	for _, id := range []string{"backfilling", "done"} {
		p := b.post("/audiences/new", url.Values{"id": {id}, "name": {"Aud " + id}, "source": {"web"}, "event": {"Order Completed"}, "atLeast": {"1"}})
		if p.Status != http.StatusSeeOther {
			t.Fatalf("create %s: %d %s", id, p.Status, p.Body)
		}
	}
	b.get("/audiences/backfilling").contains(t, http.StatusOK,
		"Backfilling from tracking.events: 2 of 3 partitions done, 1,234,567 events read (2026-10-28T07:40:00.000Z to 2026-11-27T07:40:00.000Z). It sends nothing until every partition is done.")
	if p := b.get("/audiences/done"); strings.Contains(p.Body, "Backfilling") {
		t.Fatalf("a done audience shows a backfill: %s", p.Body)
	}
	p := b.get("/audiences")
	p.contains(t, http.StatusOK, `>backfilling</span>`)
	if strings.Count(p.Body, `>backfilling</span>`) != 1 {
		t.Fatalf("the list shows %d backfill badges, want 1", strings.Count(p.Body, `>backfilling</span>`))
	}
}

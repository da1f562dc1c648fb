package console

import "net/http"

// The audiences and computed traits pages.

func (u *ui) audiencePages(pg func(string, http.HandlerFunc)) {
	pg("GET /audiences", u.audiences)
}

func (u *ui) audiences(w http.ResponseWriter, r *http.Request) {
	snap := u.s.deps.Store.Snapshot()
	u.render(w, r, http.StatusOK, "audiences", page{Title: "Audiences", Nav: "audiences", Data: map[string]any{
		"Audiences": snap.Audiences(), "Traits": snap.ComputedTraits()}})
}

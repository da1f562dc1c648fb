package console

import "net/http"

// The destinations pages (the catalog, seed 000's setup flow, a destination's health, log, DLQ
// and test).

func (u *ui) destinationPages(pg func(string, http.HandlerFunc)) {
	pg("GET /destinations", u.destinations)
}

func (u *ui) destinations(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, http.StatusOK, "destinations", page{Title: "Destinations", Nav: "destinations", Data: u.destinationRows()})
}

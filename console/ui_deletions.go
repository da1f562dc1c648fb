package console

import (
	"github.com/tributary-cdp/tributary/console/internal/views"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The deletion requests page: create one (user ids, regulation type, sources), and the list
// with each one's status (the page refreshes itself while one runs).

func (u *ui) deletionPages(pg func(string, http.HandlerFunc)) {
	pg("GET /deletions", u.deletions)
	pg("POST /deletions", u.createDeletion)
}

// deletionsData is the deletion requests page's data.
type deletionsData struct {
	Regulations []regulationRow
	Running     bool
	Types       []string
	Sources     []string
	Form        regulationRequest
	UserIDs     string
	Errors      map[string]string
}

func (u *ui) deletionsData() deletionsData {
	d := deletionsData{Types: regulationTypes}
	for _, src := range u.s.deps.Store.Snapshot().Sources() {
		d.Sources = append(d.Sources, src.ID)
	}
	regs, _ := u.s.regulations.List(0, 100, listedSubjects)
	for _, v := range regs {
		d.Running = d.Running || v.OverallStatus == views.StatusRunning
		d.Regulations = append(d.Regulations, newRegulationRow(v, u.s.cfg.RegulationStores))
	}
	return d
}

func (u *ui) deletions(w http.ResponseWriter, r *http.Request) {
	d := u.deletionsData()
	d.Form.RegulationType = regulationTypes[0]
	u.render(w, r, http.StatusOK, "deletions", page{Title: "Deletion requests", Nav: "deletions", Data: d})
}

func (u *ui) createDeletion(w http.ResponseWriter, r *http.Request) {
	req := regulationRequest{RegulationType: r.PostFormValue("regulationType"), SubjectType: "USER_ID", SourceIDs: r.PostForm["sourceIds"]}
	text := r.PostFormValue("subjectIds")
	for _, f := range strings.FieldsFunc(text, func(c rune) bool { return c == '\n' || c == ',' || c == '\r' }) {
		if f = strings.TrimSpace(f); f != "" {
			req.SubjectIDs = append(req.SubjectIDs, f)
		}
	}
	id, err := u.s.submitRegulation(r.Context(), req)
	if err != nil {
		d := u.deletionsData()
		d.Form, d.UserIDs = req, text
		var general string
		d.Errors, general = fieldErrors(err)
		for f, msg := range d.Errors { // subjectIds[3] → the user ids field
			if strings.HasPrefix(f, "subjectIds") && f != "subjectIds" {
				d.Errors["subjectIds"] = msg
			}
			if strings.HasPrefix(f, "sourceIds") && f != "sourceIds" {
				d.Errors["sourceIds"] = msg
			}
		}
		u.render(w, r, statusOf(err), "deletions", page{Title: "Deletion requests", Nav: "deletions", Error: general, Data: d})
		return
	}
	u.redirect(w, r, "/deletions", "Deletion request "+id+" created for "+plural(len(req.SubjectIDs), "user id")+".")
}

// regulationRow is one regulation on the page: its API form, how long it took to finish, and
// each store's progress (docs/console.md#regulations).
type regulationRow struct {
	regulationView
	FinishedIn string
	Stores     []storeRow
}

// storeRow is one store's progress on a regulation, as the page shows it.
type storeRow struct {
	Name     string
	Expected bool
	Done     bool   // reported on every subject
	Reported string // "2/3"
	Counts   string // "notices 2, tombstones 3"
}

// newRegulationRow orders the stores as CONSOLE_REGULATION_STORES lists them, then the others
// by name.
func newRegulationRow(v regulationView, expected []string) regulationRow {
	row := regulationRow{regulationView: v}
	if v.FinishedAfterMs != nil {
		row.FinishedIn = (time.Duration(*v.FinishedAfterMs) * time.Millisecond).Round(time.Millisecond).String()
	}
	names := slices.Clone(expected)
	for _, name := range slices.Sorted(maps.Keys(v.Stores)) {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		sv := v.Stores[name]
		var counts []string
		for _, k := range slices.Sorted(maps.Keys(sv.Counts)) {
			counts = append(counts, k+" "+fmtCount(sv.Counts[k]))
		}
		row.Stores = append(row.Stores, storeRow{Name: name, Expected: sv.Expected, Done: sv.SubjectsReported >= v.SubjectsTotal,
			Reported: strconv.Itoa(sv.SubjectsReported) + "/" + strconv.Itoa(v.SubjectsTotal), Counts: strings.Join(counts, ", ")})
	}
	return row
}

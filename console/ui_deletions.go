package console

import (
	"net/http"
	"strings"
)

// The deletion requests page: create one (user ids, regulation type, sources), and the list
// with each one's status (the page refreshes itself while one runs).

func (u *ui) deletionPages(pg func(string, http.HandlerFunc)) {
	pg("GET /deletions", u.deletions)
	pg("POST /deletions", u.createDeletion)
}

// deletionsData is the deletion requests page's data.
type deletionsData struct {
	Regulations []regulationView
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
	u.s.regulations.mu.Lock()
	for i := len(u.s.regulations.order) - 1; i >= 0 && len(d.Regulations) < 100; i-- {
		if g := u.s.regulations.order[i]; g.requested > 0 {
			v := g.view(listedSubjects)
			d.Running = d.Running || v.OverallStatus == statusRunning
			d.Regulations = append(d.Regulations, v)
		}
	}
	u.s.regulations.mu.Unlock()
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
	u.redirect(w, r, "/deletions", "Deletion request "+id+" created for "+fmtCount(len(req.SubjectIDs))+" user ids.")
}

package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/tributary-cdp/tributary/schemas"
)

// The audit page (docs/console.md#audit-trail): the recent records of the audit trail, newest
// first, filtered by a GET form (actor, action, object kind and id, time range), each with the
// fields its change changed (before → after), and a link to export the range as JSON lines.

func (u *ui) auditPages(pg func(string, http.HandlerFunc)) {
	pg("GET /audit", u.auditPage)
	pg("GET /audit/export", u.auditExport)
}

// auditPageData is the audit page's data.
type auditPageData struct {
	Filter             map[string]string // the form's values, as sent
	Rows               []auditRow
	Next, Query        string // the next page's cursor; the filters as a query (for the links)
	Window, AuditTopic string
}

// auditRow is one record as the page shows it.
type auditRow struct {
	Rec     schemas.AuditRecord
	Changes []auditChange
}

// auditChange is a field a change changed: its path, and its value before and after ("" when
// absent).
type auditChange struct {
	Path, Before, After string
}

func (u *ui) auditPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := auditPageData{Filter: map[string]string{}, Window: strconv.Itoa(u.s.cfg.AuditWindow), AuditTopic: u.s.cfg.AuditTopic}
	filters := q
	for _, k := range []string{"actor", "action", "kind", "id", "since", "until"} {
		d.Filter[k] = q.Get(k)
		if q.Get(k) == "" {
			filters.Del(k)
		}
	}
	p, _, err := u.s.auditQuery(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	filters.Del("cursor")
	filters.Del("limit")
	d.Query, d.Next = filters.Encode(), p.Next
	for _, rec := range p.Data {
		d.Rows = append(d.Rows, auditRow{Rec: rec, Changes: auditDiff(rec.Before, rec.After)})
	}
	u.render(w, r, http.StatusOK, "audit", page{Title: "Audit trail", Nav: "audit", Data: d})
}

// auditExport is GET /v1/audit/export for a signed-in browser.
func (u *ui) auditExport(w http.ResponseWriter, r *http.Request) {
	if err := u.s.exportAudit(w, r); err != nil {
		u.fail(w, r, err)
	}
}

// auditDiff lists the leaves (by their JSON path) that differ between before and after.
func auditDiff(before, after json.RawMessage) []auditChange {
	b, a := map[string]string{}, map[string]string{}
	flattenJSON(before, b)
	flattenJSON(after, a)
	var out []auditChange
	for path, v := range b {
		if a[path] != v {
			out = append(out, auditChange{Path: path, Before: v, After: a[path]})
		}
	}
	for path, v := range a {
		if _, ok := b[path]; !ok {
			out = append(out, auditChange{Path: path, After: v})
		}
	}
	slices.SortFunc(out, func(x, y auditChange) int {
		switch {
		case x.Path < y.Path:
			return -1
		case x.Path > y.Path:
			return 1
		}
		return 0
	})
	return out
}

// flattenJSON puts every leaf of raw into out by its path ("settings.webhooks[0].url").
func flattenJSON(raw json.RawMessage, out map[string]string) {
	if len(raw) == 0 {
		return
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return
	}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch t := v.(type) {
		case map[string]any:
			if len(t) == 0 && prefix != "" {
				out[prefix] = "{}"
			}
			for k, x := range t {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, x)
			}
		case []any:
			if len(t) == 0 {
				out[prefix] = "[]"
			}
			for i, x := range t {
				walk(fmt.Sprintf("%s[%d]", prefix, i), x)
			}
		default:
			b, _ := json.Marshal(t)
			out[prefix] = string(b)
		}
	}
	walk("", v)
}

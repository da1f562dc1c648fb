package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tributary-cdp/tributary/schemas"
)

// The audiences and computed traits pages: the lists with each audience's member count and
// last sync (from the audiences service's profile API), a form for each (the common cases as
// fields, the rest as the JSON of the model), a live member-count preview of a rule, and a
// profile lookup. The forms are one flow for both kinds (ui_objectform.go, ui_audience_form.go).

func (u *ui) audiencePages(pg func(string, http.HandlerFunc)) {
	pg("GET /audiences", u.audiences)
	pg("GET /audiences/profile", u.profile)
	pg("POST /audiences/preview", u.previewAudience)
	pg("POST /traits/preview", u.previewTrait)
	for _, k := range []formKind{audienceKind, traitKind} {
		pg("GET "+k.path+"new", u.newForm(k))
		pg("POST "+k.path+"new", u.saveForm(k))
		pg("GET "+k.path+"{id}", u.savedForm(k))
		pg("POST "+k.path+"{id}", u.saveForm(k))
		pg("POST "+k.path+"{id}/delete", u.deleteForm(k))
	}
}

// aud is the UI's client of the audiences service's profile API.
func (u *ui) aud() *audiencesClient { return u.profiles }

// audiencesUnavailable says why figures are missing.
func audiencesUnavailable(err error) string {
	var ae *audiencesError
	if errors.As(err, &ae) {
		if ae.Status == http.StatusUnauthorized {
			return "The audiences service refused the console's token: set AUDIENCES_TOKEN for the console as for the audiences service."
		}
		return "The audiences service could not answer (" + ae.Message + ")."
	}
	return "The audiences service does not answer at CONSOLE_AUDIENCES_URL: member counts and profiles are unavailable until it does."
}

// audienceRow is one line of the audiences table.
type audienceRow struct {
	ID, Name, Key, Source string
	Realtime              bool
	Members, LastSync     string // "–" when not had
	Partial               bool
	Backfill              string // backfillText
}

// traitRow is one line of the computed traits table.
type traitRow struct {
	ID, Name, Key, Source, Kind, Event string
	Realtime                           bool
}

// audiencesData is the audiences page's data.
type audiencesData struct {
	Audiences   []audienceRow
	Traits      []traitRow
	Unavailable string
	HasSources  bool
	Lookup      lookupData
}

// lookupData is the profile lookup form and its result.
type lookupData struct {
	// UserID is the id looked up; masked (its hash), the form does not show it again.
	UserID    string
	PIIMasked bool // the profile is masked (docs/console.md#pii-access)
	Looked    bool // a lookup was made
	Profile   *profileData
	Error     string
}

// profileData is a profile as the page shows it.
type profileData struct {
	UserID, AnonymousID, FirstSeen, LastSeen string
	Traits, ComputedTraits                   []keyValue
	Audiences                                []string
	MergedIDs                                []string
	// ExternalIDs and Identity: the profile's external ids and its last merges and refusals
	// (docs/audiences.md#identity-resolution).
	ExternalIDs []schemas.ExternalIDView
	Identity    []schemas.IdentityEventView
}

type keyValue struct {
	Key, Value string
	NoData     bool // no value yet: shown as "no data yet", not as 0
}

func (u *ui) audiences(w http.ResponseWriter, r *http.Request) {
	snap := u.s.deps.Store.Snapshot()
	d := audiencesData{HasSources: len(snap.Sources()) > 0}
	var ids []string
	for _, a := range snap.Audiences() {
		ids = append(ids, a.ID)
	}
	figures := map[string]schemas.AudienceView{}
	if len(ids) > 0 {
		var err error
		figures, err = u.aud().audiences(r.Context(), ids)
		if err != nil {
			d.Unavailable = audiencesUnavailable(err)
		}
	}
	for _, a := range snap.Audiences() {
		row := audienceRow{ID: a.ID, Name: a.Name, Key: a.TraitKey(), Source: a.Source, Realtime: a.Realtime, Members: "–", LastSync: "–"}
		if f, ok := figures[a.ID]; ok {
			row.Members, row.Partial, row.Backfill = fmtCount(f.Members), f.Partial, backfillText(f.Backfill)
			row.LastSync = "not yet"
			if t, err := schemas.ParseTimestamp(f.LastSyncAt); err == nil {
				row.LastSync = fmtWhenAgo(t)
			}
		}
		d.Audiences = append(d.Audiences, row)
	}
	for _, t := range snap.ComputedTraits() {
		kind, body := t.Aggregate()
		row := traitRow{ID: t.ID, Name: t.Name, Key: t.TraitKey(), Source: t.Source, Kind: kind, Realtime: t.Realtime}
		if body != nil {
			row.Event = body.Event
		}
		d.Traits = append(d.Traits, row)
	}
	u.render(w, r, http.StatusOK, "audiences", page{Title: "Audiences", Nav: "audiences", Data: d})
}

// profile looks a profile up by user (or anonymous) id.
func (u *ui) profile(w http.ResponseWriter, r *http.Request) {
	mask := u.s.maskOf(r)
	l := lookupData{UserID: strings.TrimSpace(r.URL.Query().Get("userId")), PIIMasked: mask.masks()}
	status := http.StatusOK
	if l.UserID != "" {
		l.Looked = true
		p, err := u.aud().profile(r.Context(), l.UserID)
		p, l.UserID = mask.profile(p), mask.id(idUser, l.UserID)
		switch {
		case err != nil:
			l.Error, status = audiencesUnavailable(err), http.StatusServiceUnavailable
		case p == nil:
			status = http.StatusNotFound
		default:
			l.Profile = profileOf(p, u.s.deps.Store.Snapshot().ComputedTraits())
		}
	}
	u.render(w, r, status, "profile", page{Title: "Profile lookup", Nav: "audiences", Data: l})
}

// profileOf is a profile's page; every computed trait is listed, "no data yet" where the
// profile has no value (a computed trait other than a count starts from the events after it
// is saved: docs/audiences.md#computed-traits).
func profileOf(p *schemas.ProfileView, computedTraits []*schemas.ComputedTrait) *profileData {
	d := &profileData{UserID: p.UserID, AnonymousID: p.AnonymousID, MergedIDs: p.MergedIDs, ExternalIDs: p.ExternalIDs, Identity: p.Identity}
	for _, ts := range []struct {
		raw string
		out *string
	}{{p.FirstSeen, &d.FirstSeen}, {p.LastSeen, &d.LastSeen}} {
		if t, err := schemas.ParseTimestamp(ts.raw); err == nil {
			*ts.out = fmtWhenAgo(t)
		}
	}
	var traits map[string]json.RawMessage
	_ = json.Unmarshal(p.Traits, &traits)
	d.Traits = sortedValues(traits)
	computed := map[string]json.RawMessage{}
	for k, v := range p.ComputedTraits {
		if string(v) != "null" {
			computed[k] = v
		}
	}
	d.ComputedTraits = sortedValues(computed)
	for _, t := range computedTraits {
		if _, ok := computed[t.TraitKey()]; !ok {
			d.ComputedTraits = append(d.ComputedTraits, keyValue{Key: t.TraitKey(), NoData: true})
		}
	}
	slices.SortFunc(d.ComputedTraits, func(a, b keyValue) int { return strings.Compare(a.Key, b.Key) })
	for _, a := range p.Audiences {
		d.Audiences = append(d.Audiences, a.ID)
	}
	return d
}

// sortedValues lists a JSON object's members by key, strings unquoted.
func sortedValues(m map[string]json.RawMessage) []keyValue {
	out := make([]keyValue, 0, len(m))
	for k, v := range m {
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v)
		}
		out = append(out, keyValue{Key: k, Value: s})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// previewText answers one line of text (the forms' live previews).
func previewText(w http.ResponseWriter, status int, s string) {
	headers(w)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(s))
}

// windowedKinds are the computed traits' kinds that have a window (within).
var windowedKinds = []string{schemas.AggCount, schemas.AggSum, schemas.AggAvg, schemas.AggMin, schemas.AggMax}

// previewTrait answers, as text, the trait key the computed trait form's name gives and how
// many profiles get a value: those that sent the event (in the window), counted by the
// audiences service as an audience's preview is. A count is computed from the events the
// audiences service keeps; every other kind is backfilled from tracking.events' retention
// before its first sync (docs/audiences.md#backfill).
func (u *ui) previewTrait(w http.ResponseWriter, r *http.Request) {
	f := traitFormOf(r)
	f.Within = strings.TrimSpace(r.PostFormValue("within"))
	var b strings.Builder
	if key := f.Key(); key != "" {
		b.WriteString("Trait key: " + key + ". ")
	} else {
		b.WriteString("Name it to see its trait key. ")
	}
	if f.Event == "" {
		b.WriteString("Fill in the event to see how many profiles get a value.")
		previewText(w, http.StatusOK, b.String())
		return
	}
	cond := map[string]any{"event": f.Event}
	windowed := f.Within != "" && slices.Contains(windowedKinds, f.Kind)
	if windowed {
		cond["within"] = f.Within
	}
	rule, _ := json.Marshal(cond)
	p, err := u.aud().preview(r.Context(), rule)
	if err != nil {
		msg := "the audiences service does not answer"
		var ae *audiencesError
		if errors.As(err, &ae) {
			msg = ae.Message
		}
		b.WriteString("Value preview unavailable: " + msg + ".")
		previewText(w, http.StatusOK, b.String())
		return
	}
	b.WriteString("≈ " + fmtCount(p.Count) + " of " + plural(p.Profiles, "profile") + " sent " + f.Event)
	if windowed {
		b.WriteString(" in the window")
	}
	if f.Kind == schemas.AggCount {
		b.WriteString(": they get a count now; the others 0.")
	} else {
		b.WriteString(": " + f.Kind + " is backfilled from the events tracking.events retains once it is saved, and sent when every partition is done.")
	}
	previewText(w, http.StatusOK, b.String())
}

// previewAudience answers, as one line of text, how many profiles the form's rule matches
// now, or why it cannot say.
func (u *ui) previewAudience(w http.ResponseWriter, r *http.Request) {
	text := func(status int, s string) { previewText(w, status, s) }
	f := audienceFormOf(r)
	rule := f.rule()
	if rule == nil {
		msg := "Fill in an event or a trait (or an audience they are in), or write the rule's JSON, to see how many profiles match."
		for _, k := range []string{"atLeast", "trait", "rule"} {
			if e := f.Errors[k]; e != "" && (k != "rule" || f.RuleJSON != "") {
				msg = "Not a rule yet: " + e
				break
			}
		}
		text(http.StatusOK, msg)
		return
	}
	if msg := u.checkRule(f, rule); msg != "" {
		text(http.StatusOK, "Not a valid rule yet: "+msg)
		return
	}
	p, err := u.aud().preview(r.Context(), rule)
	if err != nil {
		msg := "Preview unavailable: the audiences service does not answer."
		var ae *audiencesError
		if errors.As(err, &ae) {
			msg = "Preview unavailable: " + ae.Message + "."
		}
		text(http.StatusOK, msg)
		return
	}
	var b strings.Builder
	b.WriteString("≈ " + fmtCount(p.Count) + " of " + fmtCount(p.Profiles) + " profiles match now")
	if p.Partial {
		b.WriteString(" (counted on " + strconv.Itoa(p.Partitions) + " of " + strconv.Itoa(p.Total) + " partitions)")
	}
	b.WriteString(".")
	if p.NewAggregate {
		b.WriteString(" A where filter no audience counts yet: once saved, it is backfilled from the events tracking.events retains before the audience is sent.")
	}
	text(http.StatusOK, b.String())
}

// checkRule validates the form's rule as the API would (the config parser and the whole
// config's rules) and returns the first problem of the rule, "" when there is none.
func (u *ui) checkRule(f *audienceForm, rule json.RawMessage) string {
	obj := map[string]any{"id": f.ID, "name": f.Name, "source": f.Source, "rule": rule}
	b, err := json.Marshal(obj)
	if err != nil {
		return err.Error()
	}
	o, err := parseObject(schemas.ConfigKindAudience, b)
	if err == nil {
		err = u.s.validateObject(o)
	}
	if err == nil {
		return ""
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		return err.Error()
	}
	list := ae.Errors
	if len(list) == 0 {
		list = []fieldError{{Field: ae.Field, Message: ae.Message}}
	}
	for _, e := range list {
		if e.Field == "rule" || strings.HasPrefix(e.Field, "rule.") || strings.HasPrefix(e.Field, "rule[") {
			return e.Field + ": " + strings.TrimPrefix(e.Message, e.Field+": ")
		}
	}
	return ""
}

package console

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// The audiences and computed traits pages: the lists with each audience's member count and
// last sync (from the audiences service's profile API), a form for each (the common cases as
// fields, the rest as the JSON of the model), a live member-count preview of a rule, and a
// profile lookup. Writes go through the API's operations (createObject, updateObject,
// removeObject), so the pages validate exactly as the API does.

func (u *ui) audiencePages(pg func(string, http.HandlerFunc)) {
	pg("GET /audiences", u.audiences)
	pg("GET /audiences/profile", u.profile)
	pg("GET /audiences/new", u.newAudience)
	pg("POST /audiences/new", u.saveAudience)
	pg("POST /audiences/preview", u.previewAudience)
	pg("GET /audiences/{id}", u.audience)
	pg("POST /audiences/{id}", u.saveAudience)
	pg("POST /audiences/{id}/delete", u.deleteAudience)
	pg("GET /traits/new", u.newTrait)
	pg("POST /traits/new", u.saveTrait)
	pg("GET /traits/{id}", u.trait)
	pg("POST /traits/{id}", u.saveTrait)
	pg("POST /traits/{id}/delete", u.deleteTrait)
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
	UserID  string
	Looked  bool // a lookup was made
	Profile *profileData
	Error   string
}

// profileData is a profile as the page shows it.
type profileData struct {
	UserID, AnonymousID, FirstSeen, LastSeen string
	Traits, ComputedTraits                   []keyValue
	Audiences                                []string
	MergedIDs                                []string
}

type keyValue struct{ Key, Value string }

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
			row.Members, row.Partial = fmtCount(f.Members), f.Partial
			row.LastSync = "not yet"
			if t, err := schemas.ParseTimestamp(f.LastSyncAt); err == nil {
				row.LastSync = fmtAgo(t)
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
	l := lookupData{UserID: strings.TrimSpace(r.URL.Query().Get("userId"))}
	status := http.StatusOK
	if l.UserID != "" {
		l.Looked = true
		p, err := u.aud().profile(r.Context(), l.UserID)
		switch {
		case err != nil:
			l.Error, status = audiencesUnavailable(err), http.StatusServiceUnavailable
		case p == nil:
			status = http.StatusNotFound
		default:
			l.Profile = profileOf(p)
		}
	}
	u.render(w, r, status, "profile", page{Title: "Profile lookup", Nav: "audiences", Data: l})
}

func profileOf(p *schemas.ProfileView) *profileData {
	d := &profileData{UserID: p.UserID, AnonymousID: p.AnonymousID, MergedIDs: p.MergedIDs}
	for _, ts := range []struct {
		raw string
		out *string
	}{{p.FirstSeen, &d.FirstSeen}, {p.LastSeen, &d.LastSeen}} {
		if t, err := schemas.ParseTimestamp(ts.raw); err == nil {
			*ts.out = fmtWhen(t) + " (" + fmtAgo(t) + ")"
		}
	}
	var traits map[string]json.RawMessage
	_ = json.Unmarshal(p.Traits, &traits)
	d.Traits = sortedValues(traits)
	d.ComputedTraits = sortedValues(p.ComputedTraits)
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

// windows are the choices of a "within" select: "" is ever.
var windows = []option{{"24h", "1 day"}, {"168h", "7 days"}, {"720h", "30 days"}, {"2160h", "90 days"}, {"", "ever"}}

type option struct{ Value, Label string }

// windowOptions are windows plus cur when it is another one (so that editing keeps it).
func windowOptions(cur string) []option {
	for _, o := range windows {
		if o.Value == cur {
			return windows
		}
	}
	return append(slices.Clone(windows), option{cur, cur})
}

// The audience and computed-trait forms go through one flow: newForm, formPage and saveForm
// (and deleteObject), given the kind's formKind and its form, an objectForm.

// formKind is what tells the audience pages from the computed-trait pages in the shared flow.
type formKind struct {
	kind     schemas.ConfigKind
	path     string // of the pages: path+"new", path+id
	noun     string // "Audience": the titles and the messages
	template string
	created  string // the message after a creation, after "<noun> <id> created: "
}

var (
	audienceKind = formKind{kind: schemas.ConfigKindAudience, path: "/audiences/", noun: "Audience", template: "audience",
		created: "the next sync sends it to its members."}
	traitKind = formKind{kind: schemas.ConfigKindComputedTrait, path: "/traits/", noun: "Computed trait", template: "trait",
		created: "the next sync sends its values."}
)

// objectForm is the form of an audience (*audienceForm) or a computed trait (*traitForm).
type objectForm interface {
	base() *formBase
	// object is the form's object as the API's body; nil, with the reason in Errors, when
	// the form cannot make one.
	object() map[string]any
	// place puts the API's field errors next to the form's fields; it returns the rest.
	place(errs map[string]string) string
	// fill adds what the form's page shows besides the fields formPage fills.
	fill(u *ui, r *http.Request)
}

var (
	_ objectForm = (*audienceForm)(nil)
	_ objectForm = (*traitForm)(nil)
)

// formBase is what the audience and computed-trait forms share, with the errors next to
// their fields.
type formBase struct {
	New                     bool
	ID, Name, Source        string
	Realtime                bool
	Within                  string // the window select's value
	Version                 int64
	Origin                  string
	Sources                 []string
	Windows                 []option
	Errors                  map[string]string
	ManagedByFile, TakeOver bool
}

func (b *formBase) base() *formBase { return b }

// formBaseOf reads the fields every posted form has.
func formBaseOf(r *http.Request) formBase {
	v := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	return formBase{ID: v("id"), Name: v("name"), Source: v("source"), Realtime: v("realtime") == "true",
		Within: v("within"), TakeOver: v("takeOver") == "true", Errors: map[string]string{}}
}

// commonField is whether an API error's field is one of formBase's.
func commonField(field string) bool {
	return field == "id" || field == "name" || field == "source" || field == "realtime"
}

// formPage renders the form of kind k, with the config's sources to choose from.
func (u *ui) formPage(w http.ResponseWriter, r *http.Request, status int, k formKind, f objectForm, general string) {
	b := f.base()
	b.Sources = nil
	for _, s := range u.s.deps.Store.Snapshot().Sources() {
		b.Sources = append(b.Sources, s.ID)
	}
	b.Windows = windowOptions(b.Within)
	b.ManagedByFile = strings.HasPrefix(b.Origin, schemas.OriginFilePrefix)
	f.fill(u, r)
	title := "New " + strings.ToLower(k.noun)
	if !b.New {
		title = k.noun + " " + b.ID
	}
	u.render(w, r, status, k.template, page{Title: title, Nav: "audiences", Error: general, Data: f})
}

// newForm shows a new form of kind k, its source the config's first.
func (u *ui) newForm(w http.ResponseWriter, r *http.Request, k formKind, f objectForm) {
	b := f.base()
	b.New = true
	if srcs := u.s.deps.Store.Snapshot().Sources(); len(srcs) > 0 {
		b.Source = srcs[0].ID
	}
	u.formPage(w, r, http.StatusOK, k, f, "")
}

// saveForm creates (POST <path>new) or changes (POST <path>{id}) the object of kind k that
// the posted form f says.
func (u *ui) saveForm(w http.ResponseWriter, r *http.Request, k formKind, f objectForm) {
	b := f.base()
	id := r.PathValue("id")
	b.New = id == ""
	if !b.New {
		b.ID, b.Origin = id, u.originOf(k.kind, id)
		b.Version, _ = strconv.ParseInt(r.PostFormValue("version"), 10, 64)
	}
	obj := f.object()
	if obj == nil {
		u.formPage(w, r, http.StatusBadRequest, k, f, "")
		return
	}
	var err error
	if b.New {
		obj["id"] = b.ID
		var body []byte
		if body, err = json.Marshal(obj); err == nil {
			_, err = u.s.createJSON(r.Context(), k.kind, body)
		}
	} else {
		// The update is a merge patch: of decoded JSON values.
		for key, v := range obj {
			if raw, ok := v.(json.RawMessage); ok {
				var x any
				_ = json.Unmarshal(raw, &x)
				obj[key] = x
			}
		}
		obj["realtime"] = b.Realtime
		_, err = u.s.updateObject(r.Context(), k.kind, id, obj,
			writeOptions{IfMatch: r.PostFormValue("version"), TakeOver: b.TakeOver}, nil)
	}
	if err != nil {
		errs, general := fieldErrors(err)
		if g := f.place(errs); g != "" {
			general = strings.TrimSpace(general + " " + g)
		}
		u.formPage(w, r, statusOf(err), k, f, general)
		return
	}
	if b.New {
		u.redirect(w, r, k.path+b.ID, k.noun+" "+b.ID+" created: "+k.created)
		return
	}
	u.redirect(w, r, k.path+id, k.noun+" "+id+" saved.")
}

// audienceForm is the audience form.
type audienceForm struct {
	formBase
	Event, AtLeast                 string
	Trait, TraitValue              string
	RuleJSON                       string
	Members, LastSync, Unavailable string
	Advanced                       bool
}

// fill opens the rule's JSON when it is the rule or wrong, and shows a saved audience's
// member count from the audiences service.
func (f *audienceForm) fill(u *ui, r *http.Request) {
	f.Advanced = f.Advanced || f.RuleJSON != "" || f.Errors["rule"] != ""
	if f.New {
		return
	}
	if fig, err := u.aud().audiences(r.Context(), []string{f.ID}); err != nil {
		f.Unavailable = audiencesUnavailable(err)
	} else if x, ok := fig[f.ID]; ok {
		f.Members = fmtCount(x.Members)
		if t, err := schemas.ParseTimestamp(x.LastSyncAt); err == nil {
			f.LastSync = fmtAgo(t)
		}
	}
}

func (u *ui) newAudience(w http.ResponseWriter, r *http.Request) {
	u.newForm(w, r, audienceKind, &audienceForm{formBase: formBase{Within: "720h"}, AtLeast: "1"})
}

func (u *ui) audience(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	snap := u.s.deps.Store.Snapshot()
	a, ok := snap.AudienceByID(id)
	if !ok {
		u.fail(w, r, errNotFound("There is no audience %q.", id))
		return
	}
	f := &audienceForm{formBase: formBase{ID: a.ID, Name: a.Name, Source: a.Source, Realtime: a.Realtime,
		Version: snap.Revision(schemas.ConfigKindAudience, id), Origin: a.Origin}}
	f.fillRule(&a.Rule)
	u.formPage(w, r, http.StatusOK, audienceKind, f, "")
}

// simpleEvent reports whether c is an event condition the form's fields say whole.
func simpleEvent(c *schemas.Condition) bool {
	return c.Event != "" && c.AtMost == nil && len(c.Where) == 0 && !c.HasOperator() && len(c.All)+len(c.Any) == 0 && c.Not == nil
}

// simpleTrait reports whether c is a trait condition the form's fields say whole: equals a
// value, or exists.
func simpleTrait(c *schemas.Condition) bool {
	if c.Trait == "" || len(c.All)+len(c.Any) > 0 || c.Not != nil {
		return false
	}
	cmp := c.Comparison
	eq, ex := cmp.Equals, cmp.Exists
	cmp.Equals, cmp.Exists = nil, nil
	if cmp.HasOperator() || (eq == nil) == (ex == nil) {
		return false
	}
	return ex == nil || *ex
}

// fillRule puts a rule into the form: in the fields when they can say it, else as JSON.
func (f *audienceForm) fillRule(rule *schemas.Condition) {
	setEvent := func(c *schemas.Condition) {
		f.Event, f.AtLeast = c.Event, strconv.Itoa(c.MinCount())
		if c.Within != 0 {
			f.Within = schemas.ShortDuration(time.Duration(c.Within))
		}
	}
	setTrait := func(c *schemas.Condition) {
		f.Trait = c.Trait
		if c.Equals != nil {
			f.TraitValue = formatTraitValue(c.Equals)
		}
	}
	switch {
	case simpleEvent(rule):
		setEvent(rule)
	case simpleTrait(rule):
		setTrait(rule)
	case len(rule.All) == 2 && simpleEvent(&rule.All[0]) && simpleTrait(&rule.All[1]) && rule.Not == nil && !rule.HasOperator():
		setEvent(&rule.All[0])
		setTrait(&rule.All[1])
	default:
		b, _ := json.MarshalIndent(rule, "", "  ")
		f.RuleJSON = string(b)
	}
}

// parseTraitValue reads a trait value field: true, false and numbers are those values, a
// quoted text is the text, anything else is text as written.
func parseTraitValue(s string) any {
	switch s {
	case "true":
		return true
	case "false":
		return false
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	if n, err := strconv.ParseFloat(s, 64); err == nil && json.Valid([]byte(s)) {
		return n
	}
	return s
}

// formatTraitValue is parseTraitValue's inverse.
func formatTraitValue(v any) string {
	switch x := v.(type) {
	case string:
		if _, text := parseTraitValue(x).(string); !text || strings.HasPrefix(x, `"`) {
			return `"` + x + `"`
		}
		return x
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// audienceFormOf reads the posted audience form.
func audienceFormOf(r *http.Request) *audienceForm {
	v := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	return &audienceForm{formBase: formBaseOf(r), Event: v("event"), AtLeast: v("atLeast"), Trait: v("trait"),
		TraitValue: v("traitValue"), RuleJSON: v("rule")}
}

// ruleConditions locates the form's conditions in the rule it builds: the paths of its event
// and trait conditions ("" when absent).
func (f *audienceForm) ruleConditions() (event, trait string) {
	switch {
	case f.Event != "" && f.Trait != "":
		return "rule.all[0]", "rule.all[1]"
	case f.Event != "":
		return "rule", ""
	case f.Trait != "":
		return "", "rule"
	}
	return "", ""
}

// rule is the rule the form says: its JSON when written (it wins), else the one its fields
// build. It is nil when there is none, with the reason in f.Errors.
func (f *audienceForm) rule() json.RawMessage {
	if f.RuleJSON != "" {
		var v any
		if err := json.Unmarshal([]byte(f.RuleJSON), &v); err != nil {
			f.Errors["rule"] = "This is not JSON: " + err.Error() + "."
			return nil
		}
		return json.RawMessage(f.RuleJSON)
	}
	var conds []map[string]any
	if f.Event != "" {
		c := map[string]any{"event": f.Event}
		if f.AtLeast != "" {
			n, err := strconv.Atoi(f.AtLeast)
			if err != nil {
				f.Errors["atLeast"] = "A whole number of times, such as 2."
				return nil
			}
			c["atLeast"] = n
		}
		if f.Within != "" {
			c["within"] = f.Within
		}
		conds = append(conds, c)
	}
	if f.Trait != "" {
		c := map[string]any{"trait": f.Trait}
		if f.TraitValue == "" {
			c["exists"] = true
		} else {
			c["equals"] = parseTraitValue(f.TraitValue)
		}
		conds = append(conds, c)
	} else if f.TraitValue != "" {
		f.Errors["trait"] = "Name the trait whose value this is."
		return nil
	}
	var rule any
	switch len(conds) {
	case 0:
		f.Errors["rule"] = "Say who is in the audience: an event they sent, a trait they have, or the rule's JSON."
		return nil
	case 1:
		rule = conds[0]
	default:
		rule = map[string]any{"all": conds}
	}
	b, _ := json.Marshal(rule)
	return b
}

// place puts the API's field errors next to the form's fields; it returns the rest.
func (f *audienceForm) place(errs map[string]string) string {
	ev, tr := f.ruleConditions()
	var rest []string
	for _, field := range slices.Sorted(maps.Keys(errs)) {
		msg := errs[field]
		switch {
		case commonField(field):
			f.Errors[field] = msg
		case f.RuleJSON == "" && ev != "" && slices.Contains([]string{ev + ".event", ev + ".atLeast", ev + ".within"}, field):
			f.Errors[strings.TrimPrefix(field, ev+".")] = msg
		case f.RuleJSON == "" && tr != "" && field == tr+".trait":
			f.Errors["trait"] = msg
		case f.RuleJSON == "" && tr != "" && strings.HasPrefix(field, tr+"."):
			f.Errors["traitValue"] = msg
		case field == "rule" || strings.HasPrefix(field, "rule.") || strings.HasPrefix(field, "rule["):
			f.Advanced = f.Advanced || f.RuleJSON != ""
			if field != "rule" {
				msg = strings.TrimPrefix(field, "rule.") + ": " + msg
			}
			if f.Errors["rule"] == "" {
				f.Errors["rule"] = msg
			}
		default:
			rest = append(rest, field+": "+msg)
		}
	}
	sort.Strings(rest)
	return strings.Join(rest, " ")
}

// object is the form's audience as the API's body (nil when the form has no rule).
func (f *audienceForm) object() map[string]any {
	rule := f.rule()
	if rule == nil {
		return nil
	}
	m := map[string]any{"name": f.Name, "source": f.Source, "rule": rule}
	if f.Realtime {
		m["realtime"] = true
	}
	return m
}

// saveAudience creates (POST /audiences/new) or changes (POST /audiences/{id}) an audience.
func (u *ui) saveAudience(w http.ResponseWriter, r *http.Request) {
	u.saveForm(w, r, audienceKind, audienceFormOf(r))
}

// originOf is the origin of the current object of kind and id.
func (u *ui) originOf(kind schemas.ConfigKind, id string) string {
	o, ok := lookup(u.s.deps.Store.Snapshot(), kind, id)
	if !ok {
		return ""
	}
	return o.Origin()
}

func (u *ui) deleteAudience(w http.ResponseWriter, r *http.Request) {
	u.deleteObject(w, r, audienceKind)
}

func (u *ui) deleteTrait(w http.ResponseWriter, r *http.Request) { u.deleteObject(w, r, traitKind) }

// deleteObject deletes the object of kind k (POST <path>{id}/delete) and goes back to the
// audiences page, which lists both kinds.
func (u *ui) deleteObject(w http.ResponseWriter, r *http.Request, k formKind) {
	id := r.PathValue("id")
	if err := u.s.removeObject(r.Context(), k.kind, id, writeOptions{TakeOver: r.PostFormValue("takeOver") == "true"}); err != nil {
		u.fail(w, r, err)
		return
	}
	u.redirect(w, r, "/audiences", k.noun+" "+id+" deleted.")
}

// previewAudience answers, as one line of text, how many profiles the form's rule matches
// now, or why it cannot say.
func (u *ui) previewAudience(w http.ResponseWriter, r *http.Request) {
	text := func(status int, s string) {
		headers(w)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(s))
	}
	f := audienceFormOf(r)
	rule := f.rule()
	if rule == nil {
		msg := "Fill in an event or a trait, or write the rule's JSON, to see how many profiles match."
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
		b.WriteString(" A where filter counts the events from when the audience is saved on: there is no backfill.")
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
		o.SetOrigin(schemas.OriginConsole)
		cfg := configOf(u.s.deps.Store.Snapshot(), o)
		if verr := cfg.Validate(); verr != nil {
			err = invalid(verr, cfg, lists[schemas.ConfigKindAudience])
		}
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

// traitForm is the computed trait form.
type traitForm struct {
	formBase
	Kind, Event, Property, Where string
	Kinds                        []string
}

// fill lists the kinds of aggregate.
func (f *traitForm) fill(*ui, *http.Request) { f.Kinds = schemas.AggregateKinds }

func (u *ui) newTrait(w http.ResponseWriter, r *http.Request) {
	u.newForm(w, r, traitKind, &traitForm{formBase: formBase{Within: "720h"}, Kind: schemas.AggCount})
}

func (u *ui) trait(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	snap := u.s.deps.Store.Snapshot()
	t, ok := snap.ComputedTraitByID(id)
	if !ok {
		u.fail(w, r, errNotFound("There is no computed trait %q.", id))
		return
	}
	f := &traitForm{formBase: formBase{ID: t.ID, Name: t.Name, Source: t.Source, Realtime: t.Realtime,
		Version: snap.Revision(schemas.ConfigKindComputedTrait, id), Origin: t.Origin}}
	kind, body := t.Aggregate()
	f.Kind = kind
	if body != nil {
		f.Event, f.Property = body.Event, body.Property
		if body.Within != 0 {
			f.Within = schemas.ShortDuration(time.Duration(body.Within))
		}
		if len(body.Where) > 0 {
			b, _ := json.MarshalIndent(body.Where, "", "  ")
			f.Where = string(b)
		}
	}
	u.formPage(w, r, http.StatusOK, traitKind, f, "")
}

// object is the form's computed trait as the API's body (nil with f.Errors set when the
// form cannot make one).
func (f *traitForm) object() map[string]any {
	if !slices.Contains(schemas.AggregateKinds, f.Kind) {
		f.Errors["kind"] = "Choose what to compute."
		return nil
	}
	agg := map[string]any{"event": f.Event}
	if f.Property != "" {
		agg["property"] = f.Property
	}
	if f.Within != "" {
		agg["within"] = f.Within
	}
	if f.Where != "" {
		var where any
		if err := json.Unmarshal([]byte(f.Where), &where); err != nil {
			f.Errors["where"] = "This is not JSON: " + err.Error() + "."
			return nil
		}
		agg["where"] = where
	}
	m := map[string]any{"name": f.Name, "source": f.Source, f.Kind: agg}
	if f.Realtime {
		m["realtime"] = true
	}
	return m
}

// place puts the API's field errors next to the form's fields; it returns the rest.
func (f *traitForm) place(errs map[string]string) string {
	var rest []string
	for _, field := range slices.Sorted(maps.Keys(errs)) { // the outer field's message first
		msg := errs[field]
		sub, inKind := strings.CutPrefix(field, f.Kind+".")
		switch {
		case commonField(field):
			f.Errors[field] = msg
		case inKind && (sub == "event" || sub == "property" || sub == "within"):
			f.Errors[sub] = msg
		case inKind && strings.HasPrefix(sub, "where"):
			if sub != "where" {
				msg = sub + ": " + msg
			}
			if f.Errors["where"] == "" {
				f.Errors["where"] = msg
			}
		case field == f.Kind || slices.Contains(schemas.AggregateKinds, field):
			f.Errors["kind"] = msg
		default:
			rest = append(rest, field+": "+msg)
		}
	}
	sort.Strings(rest)
	return strings.Join(rest, " ")
}

// saveTrait creates (POST /traits/new) or changes (POST /traits/{id}) a computed trait.
func (u *ui) saveTrait(w http.ResponseWriter, r *http.Request) {
	v := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	u.saveForm(w, r, traitKind, &traitForm{formBase: formBaseOf(r), Kind: v("kind"), Event: v("event"), Property: v("property"),
		Where: v("where")})
}

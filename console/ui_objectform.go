package console

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tributary-cdp/tributary/schemas"
)

// The audience and computed-trait forms go through one flow: newForm, savedForm, saveForm and
// deleteForm (the handlers of a kind's pages, given its formKind), and formPage, which renders
// its form, an objectForm. Writes go through the config write path (configwrite.go), so the
// pages validate exactly as the API does.

// formKind is what tells the audience pages from the computed-trait pages in the shared flow.
type formKind struct {
	kind     schemas.ConfigKind
	path     string // of the pages: path+"new", path+id
	noun     string // "Audience": the titles and the messages
	template string
	created  string // the message after a creation, after "<noun> <id> created: "
	// blank is the form of a new object, with its defaults.
	blank func() objectForm
	// posted reads the posted form.
	posted func(r *http.Request) objectForm
	// saved is the form of a saved object (load fills it).
	saved func() objectForm
}

var (
	audienceKind = formKind{kind: schemas.ConfigKindAudience, path: "/audiences/", noun: "Audience", template: "audience",
		created: "the next sync sends it to its members.",
		blank:   func() objectForm { return &audienceForm{formBase: formBase{Within: "720h"}, AtLeast: "1"} },
		posted:  func(r *http.Request) objectForm { return audienceFormOf(r) },
		saved:   func() objectForm { return &audienceForm{} }}
	traitKind = formKind{kind: schemas.ConfigKindComputedTrait, path: "/traits/", noun: "Computed trait", template: "trait",
		created: "the next sync sends its values.",
		blank:   func() objectForm { return &traitForm{formBase: formBase{Within: "720h"}, Kind: schemas.AggCount} },
		posted:  func(r *http.Request) objectForm { return traitFormOf(r) },
		saved:   func() objectForm { return &traitForm{} }}
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
	// load puts a saved object's fields into the form.
	load(o schemas.ConfigObject)
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

// newForm is GET <path>new: a new form of kind k, its source the config's first.
func (u *ui) newForm(k formKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f := k.blank()
		b := f.base()
		b.New = true
		if srcs := u.s.deps.Store.Snapshot().Sources(); len(srcs) > 0 {
			b.Source = srcs[0].ID
		}
		u.formPage(w, r, http.StatusOK, k, f, "")
	}
}

// savedForm is GET <path>{id}: the form of the saved object of kind k.
func (u *ui) savedForm(k formKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		snap := u.s.deps.Store.Snapshot()
		o, ok := lookup(snap, k.kind, id)
		if !ok {
			u.fail(w, r, errNotFound("There is no %s %q.", nouns[k.kind], id))
			return
		}
		f := k.saved()
		b := f.base()
		b.ID, b.Version, b.Origin = id, snap.Revision(k.kind, id), o.Origin()
		f.load(o)
		u.formPage(w, r, http.StatusOK, k, f, "")
	}
}

// saveForm is POST <path>new and POST <path>{id}: it creates or changes the object of kind k
// that the posted form says.
func (u *ui) saveForm(k formKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { u.save(w, r, k, k.posted(r)) }
}

// save creates or changes the object the posted form f says.
func (u *ui) save(w http.ResponseWriter, r *http.Request, k formKind, f objectForm) {
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

// originOf is the origin of the current object of kind and id.
func (u *ui) originOf(kind schemas.ConfigKind, id string) string {
	o, ok := lookup(u.s.deps.Store.Snapshot(), kind, id)
	if !ok {
		return ""
	}
	return o.Origin()
}

// deleteForm is POST <path>{id}/delete: it deletes the object of kind k and goes back to the
// audiences page, which lists both kinds.
func (u *ui) deleteForm(k formKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if err := u.s.removeObject(r.Context(), k.kind, id, writeOptions{TakeOver: r.PostFormValue("takeOver") == "true"}); err != nil {
			u.fail(w, r, err)
			return
		}
		u.redirect(w, r, "/audiences", k.noun+" "+id+" deleted.")
	}
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

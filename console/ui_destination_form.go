package console

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tributary-cdp/tributary/schemas"
)

// The destination setup flow (the wizard, Segment's steps of a Webhooks destination) and the
// actions of a destination's page (edit, enable, delete, DLQ replay, test): forms read and
// checked here, written through the config write path (configwrite.go) and the DLQ and test
// operations the API shares (replay, runTest).

// The setup flow's steps, in the order of Segment's Webhooks destination
// (docs/console.md#the-web-ui): the sources, the URLs with their static headers, the shared
// secret, then enable.
const (
	stepSources = 1
	stepURLs    = 2
	stepSecret  = 3
	stepReview  = 4
)

var stepNames = []string{"Name and sources", "Webhook URLs", "Shared secret", "Review and enable"}

// placeholderURL stands for the URLs while an earlier step is checked (the URLs are required).
const placeholderURL = "https://example.com/placeholder"

// sourceChoice is one source's checkbox.
type sourceChoice struct {
	ID, Name string
	Checked  bool
}

// hookRow is one webhook's inputs: its URL and its static headers, one "Name: value" per line.
type hookRow struct {
	Index                  int
	URLID, HeadersID       string // the inputs' ids
	URL, Headers           string
	URLError, HeadersError string
	HeaderNames            []string // for the review step (values may be tokens: not shown)
}

// destForm is the setup flow's state (every step's inputs, carried in hidden fields) and the
// edit form of a destination page.
type destForm struct {
	Step             int // 1..4 in the setup flow; 0 on the edit form
	Editing          bool
	Prefix           string // of the inputs' ids
	ID, Name         string
	Sources          []sourceChoice
	Hooks            []hookRow
	Secret           string
	HasSecret        bool // editing: the destination has one
	RemoveSecret     bool
	StandardWebhooks bool
	Ordered          bool   // settings.ordering: perUser (ui_destination_delivery.go)
	AutoDisableAfter string // settings.autoDisable.after; empty: never
	Enable           bool
	Version          int64
	Origin           string
	ManagedByFile    bool
	Errors           map[string]string // by input: id, name, sources, webhooks, url0, headers0, secret, standardWebhooks, ordered, autoDisableAfter, enabled
	Steps            []string
	Rows             int  // webhook rows shown: the used ones, one more after "Add a URL"
	GeneratedSecret  bool // the secret was just generated: shown, to copy it

	// Rendered parts (destination_fields.html), shared by the setup flow and the edit form.
	SourcesHTML, HooksHTML, SecretHTML template.HTML
}

// Chosen is the ids of the checked sources.
func (f *destForm) Chosen() []string {
	var out []string
	for _, s := range f.Sources {
		if s.Checked {
			out = append(out, s.ID)
		}
	}
	return out
}

// UsedHooks is the rows with a URL or headers.
func (f *destForm) UsedHooks() []hookRow {
	var out []hookRow
	for _, h := range f.Hooks {
		if strings.TrimSpace(h.URL) != "" || strings.TrimSpace(h.Headers) != "" {
			out = append(out, h)
		}
	}
	return out
}

// ShownHooks is the webhook rows the form shows (at least one).
func (f *destForm) ShownHooks() []hookRow {
	return f.Hooks[:min(max(f.Rows, 1), len(f.Hooks))]
}

// CanAddURL reports whether another URL may be added.
func (f *destForm) CanAddURL() bool { return f.Rows < len(f.Hooks) }

// Shows reports whether the setup flow shows step's inputs: the current step's, and those of
// any step with an error (every error at once, whatever its step).
func (f *destForm) Shows(step int) bool {
	if step == f.Step {
		return true
	}
	for k := range f.Errors {
		if stepOf(k) == step {
			return true
		}
	}
	return false
}

// usedRows is one past the last webhook row with a URL or headers.
func (f *destForm) usedRows() int {
	n := 0
	for i, h := range f.Hooks {
		if h.URL != "" || h.Headers != "" {
			n = i + 1
		}
	}
	return n
}

// formAction is a button of the destination forms that changes the form rather than sends
// it: "Add a URL" (one more webhook row), "Generate a secret" (a random shared secret filled
// in and shown). Without JavaScript, each posts the form back and gets it again.
func (f *destForm) formAction(pf url.Values) bool {
	switch {
	case pf.Get("addURL") != "":
		f.Rows = min(max(f.Rows, 1)+1, len(f.Hooks))
	case pf.Get("generateSecret") != "":
		f.Secret, f.GeneratedSecret, f.RemoveSecret = newSharedSecret(), true, false
	default:
		return false
	}
	return true
}

// newSharedSecret is a random shared secret: 32 bytes in hex (256 bits).
func newSharedSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newDestForm is an empty form over the current sources.
func (u *ui) newDestForm(prefix string) *destForm {
	f := &destForm{Prefix: prefix, Errors: map[string]string{}, Steps: stepNames, Enable: true}
	for _, s := range u.s.deps.Store.Snapshot().Sources() {
		f.Sources = append(f.Sources, sourceChoice{ID: s.ID, Name: s.Name})
	}
	for i := range schemas.MaxWebhooks {
		f.Hooks = append(f.Hooks, hookRow{Index: i, URLID: prefix + "url" + strconv.Itoa(i), HeadersID: prefix + "headers" + strconv.Itoa(i)})
	}
	return f
}

// readDestForm reads the form's inputs from a POST.
func (u *ui) readDestForm(r *http.Request, prefix string) *destForm {
	f := u.newDestForm(prefix)
	pf := r.PostForm
	f.ID = strings.TrimSpace(pf.Get("id"))
	f.Name = strings.TrimSpace(pf.Get("name"))
	chosen := pf["sources"]
	for i := range f.Sources {
		f.Sources[i].Checked = slices.Contains(chosen, f.Sources[i].ID)
	}
	// A source that is not (or no longer) in the config: kept, so that the API names it.
	for _, id := range chosen {
		if !slices.ContainsFunc(f.Sources, func(s sourceChoice) bool { return s.ID == id }) {
			f.Sources = append(f.Sources, sourceChoice{ID: id, Checked: true})
		}
	}
	for i := range f.Hooks {
		f.Hooks[i].URL = strings.TrimSpace(pf.Get("url" + strconv.Itoa(i)))
		f.Hooks[i].Headers = strings.TrimSpace(strings.ReplaceAll(pf.Get("headers"+strconv.Itoa(i)), "\r\n", "\n"))
	}
	f.Rows = f.usedRows()
	f.Secret = pf.Get("secret")
	f.RemoveSecret = pf.Get("removeSecret") == "true"
	f.StandardWebhooks = pf.Get("standardWebhooks") == "true"
	f.readDelivery(pf)
	return f
}

// parseHeaders reads "Name: value" lines: the headers of the good lines, and every bad line's
// problem at once (the good lines' headers are still validated by the config's rules).
func parseHeaders(text string) (map[string]string, string) {
	if strings.TrimSpace(text) == "" {
		return nil, ""
	}
	out := map[string]string{}
	var problems []string
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		switch _, dup := out[name]; {
		case !ok || name == "":
			problems = append(problems, fmt.Sprintf("line %d: write each header as “Name: value”", i+1))
		case dup:
			problems = append(problems, fmt.Sprintf("line %d: header %q is given twice", i+1, name))
		default:
			out[name] = strings.TrimSpace(value)
		}
	}
	return out, strings.Join(problems, "; ")
}

// destination builds the destination the form describes; rowOf maps a webhook's index to its
// form row. Problems the form itself finds (a header line without a colon) are in errs.
func (f *destForm) destination() (d schemas.Destination, rowOf []int, errs map[string]string) {
	errs = map[string]string{}
	d = schemas.Destination{ID: f.ID, Type: schemas.DestinationTypeWebhooks, Name: f.Name, Sources: f.Chosen()}
	if d.Sources == nil {
		d.Sources = []string{}
	}
	for i, h := range f.Hooks {
		if h.URL == "" && h.Headers == "" {
			continue
		}
		headers, problem := parseHeaders(h.Headers)
		if problem != "" {
			errs["headers"+strconv.Itoa(i)] = problem
		}
		d.Settings.Webhooks = append(d.Settings.Webhooks, schemas.Webhook{URL: h.URL, Headers: headers})
		rowOf = append(rowOf, i)
	}
	d.Settings.SharedSecret = f.Secret
	d.Settings.StandardWebhooks = f.StandardWebhooks
	f.applyDelivery(&d, errs)
	enabled := f.Enable
	d.Enabled = &enabled
	return d, rowOf, errs
}

// mergeErrors adds the config's errors to the form's own, input by input (both when an input
// has both: every error at once), and returns own.
func mergeErrors(own, config map[string]string) map[string]string {
	if own == nil {
		own = map[string]string{}
	}
	for k, v := range config {
		if mine, ok := own[k]; ok && mine != v {
			own[k] = mine + "; " + v
		} else {
			own[k] = v
		}
	}
	return own
}

// formErrors maps an API error's fields to the form's inputs; a problem of no input is general.
func formErrors(err error, rowOf []int) (map[string]string, string) {
	fields, general := fieldErrors(err)
	out := map[string]string{}
	var rest []string
	if general != "" {
		rest = append(rest, general)
	}
	set := func(k, msg string) {
		if _, seen := out[k]; !seen {
			out[k] = msg
		}
	}
	for field, msg := range fields {
		switch {
		case field == "id" || field == "name" || field == "enabled":
			set(field, msg)
		case field == "sources" || strings.HasPrefix(field, "sources["):
			set("sources", msg)
		case field == "settings.webhooks":
			set("webhooks", msg)
		case strings.HasPrefix(field, "settings.webhooks["):
			n, after, _ := strings.Cut(strings.TrimPrefix(field, "settings.webhooks["), "]")
			i, convErr := strconv.Atoi(n)
			switch {
			case convErr != nil || i >= len(rowOf):
				set("webhooks", msg) // "at most 5 webhooks" at webhooks[5]
			case strings.HasPrefix(after, ".headers"):
				name := strings.TrimPrefix(after, ".headers")
				if name != "" {
					name = strings.Trim(name, `[]`) + " " // ["X-Team"]: the header's name, quoted
				}
				set("headers"+strconv.Itoa(rowOf[i]), name+msg)
			default:
				set("url"+strconv.Itoa(rowOf[i]), msg)
			}
		case field == "settings.sharedSecret" || field == "settings.previousSharedSecret":
			set("secret", msg)
		case field == "settings.standardWebhooks":
			set("standardWebhooks", msg)
		case deliveryInput(field) != "":
			set(deliveryInput(field), msg)
		default:
			rest = append(rest, field+": "+msg)
		}
	}
	slices.Sort(rest)
	return out, strings.Join(rest, " ")
}

// stepOf is the setup step of an input.
func stepOf(field string) int {
	switch {
	case field == "id" || field == "name" || field == "sources":
		return stepSources
	case field == "webhooks" || strings.HasPrefix(field, "url") || strings.HasPrefix(field, "headers"):
		return stepURLs
	case field == "secret" || field == "standardWebhooks" || field == inputOrdered || field == inputAutoDisableAfter:
		return stepSecret
	}
	return stepReview
}

// checkStep validates the inputs of one step with checkNew on the whole candidate (later steps'
// required fields filled with placeholders) and keeps the errors of that step's inputs.
func (u *ui) checkStep(f *destForm, step int) (errs map[string]string, general string, status int) {
	d, rowOf, errs := f.destination()
	status = http.StatusBadRequest
	if step < stepURLs && len(d.Settings.Webhooks) == 0 {
		d.Settings.Webhooks = []schemas.Webhook{{URL: placeholderURL}}
		rowOf = []int{0}
	}
	if step < stepSecret && d.Settings.SharedSecret == "" {
		d.Settings.StandardWebhooks = false
	}
	obj := schemas.ConfigObject{Kind: schemas.ConfigKindDestination, ID: d.ID, Destination: &d}
	if err := u.s.checkNew(obj); err != nil {
		var fields map[string]string
		fields, general = formErrors(err, rowOf)
		if _, taken := fields["id"]; taken {
			status = statusOf(err) // 409 for an id taken
			// And the other fields' errors, at once.
			if verr := u.s.validateObject(obj); verr != nil {
				more, moreGeneral := formErrors(verr, rowOf)
				delete(more, "id")
				mergeErrors(fields, more)
				general = strings.TrimSpace(general + " " + moreGeneral)
			}
		}
		mergeErrors(errs, fields)
	}
	if len(d.Sources) == 0 {
		errs["sources"] = "Pick at least one source: its events are what this destination receives."
	}
	for k := range errs {
		if stepOf(k) > step {
			delete(errs, k)
		}
	}
	if step < stepReview {
		general = ""
	}
	return errs, general, status
}

// renderForm renders the shared parts of f (sources, webhooks, secret).
func (u *ui) renderForm(f *destForm) {
	for i := range f.Hooks {
		h := &f.Hooks[i]
		h.URLError = f.Errors["url"+strconv.Itoa(i)]
		h.HeadersError = f.Errors["headers"+strconv.Itoa(i)]
		headers, _ := parseHeaders(h.Headers)
		h.HeaderNames = sortedKeys(headers)
	}
	f.SourcesHTML = u.part("destination-sources", f)
	f.HooksHTML = u.part("destination-hooks", f)
	f.SecretHTML = u.part("destination-secret", f)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// part renders a template of destination_fields.html.
func (u *ui) part(name string, data any) template.HTML {
	t := u.pages["destination_fields"]
	if t == nil {
		return ""
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, name, data); err != nil {
		u.s.logger.Error().Err(err).Str("part", name).Msg("rendering a form failed")
		return template.HTML(`<p class="error">This part of the form could not be shown: see the console's log.</p>`)
	}
	return template.HTML(b.String()) // html/template output: escaped
}

func (u *ui) renderWizard(w http.ResponseWriter, r *http.Request, status int, f *destForm, general string) {
	u.renderForm(f)
	u.render(w, r, status, "destination_wizard", page{Title: "Add a webhooks destination", Nav: "destinations", Error: general, Data: f})
}

func (u *ui) newDestination(w http.ResponseWriter, r *http.Request) {
	f := u.newDestForm("")
	f.Step = stepSources
	u.renderWizard(w, r, http.StatusOK, f, "")
}

// newDestinationStep checks the step sent and shows the next one (or the same with its errors;
// Back shows the previous one); the last step creates the destination.
func (u *ui) newDestinationStep(w http.ResponseWriter, r *http.Request) {
	f := u.readDestForm(r, "")
	step, _ := strconv.Atoi(r.PostFormValue("step"))
	step = min(max(step, stepSources), stepReview)
	f.Enable = step != stepReview || (r.PostFormValue("enable") == "true" && r.PostFormValue("then") != "test")
	if r.PostFormValue("back") != "" {
		f.Step = max(step-1, stepSources)
		u.renderWizard(w, r, http.StatusOK, f, "")
		return
	}
	if f.formAction(r.PostForm) {
		f.Step = step
		u.renderWizard(w, r, http.StatusOK, f, "")
		return
	}
	errs, general, status := u.checkStep(f, step)
	if len(errs) > 0 || general != "" {
		// Every error at once: the step's, and an earlier step's (the id taken meanwhile)
		// shown with its inputs (Shows).
		f.Step, f.Errors = step, errs
		u.renderWizard(w, r, status, f, general)
		return
	}
	if step < stepReview {
		f.Step = step + 1
		u.renderWizard(w, r, http.StatusOK, f, "")
		return
	}
	d, rowOf, _ := f.destination()
	if _, err := u.s.createObject(r.Context(), schemas.ConfigObject{Kind: schemas.ConfigKindDestination, ID: d.ID, Destination: &d}); err != nil {
		f.Errors, general = formErrors(err, rowOf)
		f.Step = stepReview
		u.renderWizard(w, r, statusOf(err), f, general)
		return
	}
	switch {
	case r.PostFormValue("then") == "test":
		u.redirect(w, r, destinationTab(d.ID, tabTest), "Destination "+d.ID+" created, disabled: send it a test event, then enable it when its URLs answer.")
	case f.Enable:
		u.redirect(w, r, destinationTab(d.ID, tabHealth), "Destination "+d.ID+" created and enabled: it receives the next events of its sources.")
	default:
		u.redirect(w, r, destinationTab(d.ID, tabHealth), "Destination "+d.ID+" created, disabled: enable it when its endpoints are ready.")
	}
}

// editForm is the edit form filled with the destination's settings: never its shared secret,
// and its URLs and header values masked (saving a masked value keeps the stored one:
// unmaskSecrets).
func (u *ui) editForm(d *schemas.Destination, version int64) *destForm {
	f := u.newDestForm("edit-")
	f.Editing, f.ID, f.Name, f.Version, f.Origin = true, d.ID, d.Name, version, d.Origin
	f.ManagedByFile = strings.HasPrefix(d.Origin, schemas.OriginFilePrefix)
	for _, id := range d.Sources {
		if i := slices.IndexFunc(f.Sources, func(s sourceChoice) bool { return s.ID == id }); i >= 0 {
			f.Sources[i].Checked = true
		} else {
			f.Sources = append(f.Sources, sourceChoice{ID: id, Checked: true})
		}
	}
	for i, wh := range d.Settings.Webhooks {
		if i >= len(f.Hooks) {
			break
		}
		f.Hooks[i].URL = schemas.MaskURL(wh.URL)
		var lines []string
		for _, name := range sortedKeys(wh.Headers) {
			lines = append(lines, name+": "+schemas.MaskSecret(wh.Headers[name]))
		}
		f.Hooks[i].Headers = strings.Join(lines, "\n")
	}
	f.Rows = f.usedRows()
	f.HasSecret = d.Settings.SharedSecret != ""
	f.StandardWebhooks = d.Settings.StandardWebhooks
	f.fillDelivery(d)
	f.Enable = d.IsEnabled()
	return f
}

// renderDestination renders a destination page; status, flash and the page's error come from
// the action that shows it.
func (u *ui) renderDestination(w http.ResponseWriter, r *http.Request, status int, data *destinationData, general string) {
	u.renderForm(data.Edit)
	title := "Destination " + data.D.ID
	u.render(w, r, status, "destination", page{Title: title, Nav: "destinations", Error: general, Data: data})
}

func (u *ui) destination(w http.ResponseWriter, r *http.Request) {
	data, err := u.destinationData(r.Context(), r.PathValue("id"), r.URL.Query())
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.renderDestination(w, r, http.StatusOK, data, "")
}

// showError renders the destination page's tab again with err (the form's fields, or the
// page's).
func (u *ui) showError(w http.ResponseWriter, r *http.Request, tab string, err error, edit *destForm, rowOf []int) {
	data, derr := u.destinationData(r.Context(), r.PathValue("id"), url.Values{"tab": {tab}})
	if derr != nil {
		u.fail(w, r, err)
		return
	}
	fields, general := formErrors(err, rowOf)
	if edit != nil {
		edit.Errors = mergeErrors(edit.Errors, fields) // the form's own (a header line without a colon) first
		edit.Version, edit.Origin, edit.ManagedByFile, edit.HasSecret = data.Edit.Version, data.Edit.Origin, data.Edit.ManagedByFile, data.Edit.HasSecret
		data.Edit = edit
		if general == "" && len(fields) > 0 {
			general = "The destination was not saved: see the errors below."
		}
	} else {
		for _, msg := range fields {
			general = strings.TrimSpace(general + " " + msg)
		}
	}
	u.renderDestination(w, r, statusOf(err), data, general)
}

func (u *ui) enableDestination(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	enable := r.PostFormValue("enabled") == "true"
	opts := writeOptions{IfMatch: r.PostFormValue("version"), TakeOver: r.PostFormValue("takeOver") == "true"}
	if _, err := u.s.updateObject(r.Context(), schemas.ConfigKindDestination, id, map[string]any{"enabled": enable}, opts, nil); err != nil {
		u.showError(w, r, tabHealth, err, nil, nil)
		return
	}
	done := "Destination " + id + " enabled: it receives the next events of its sources."
	if !enable {
		done = "Destination " + id + " disabled: the deliverer sends it nothing until it is enabled again."
	}
	u.redirect(w, r, "/destinations/"+id, done)
}

// editDestination saves the edit form: name, sources, webhooks, secret (an empty input keeps
// it), Standard Webhooks, ordering and auto-disable (ui_destination_delivery.go), with the
// version the form was read at.
func (u *ui) editDestination(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f := u.readDestForm(r, "edit-")
	f.Editing, f.ID = true, id
	if f.formAction(r.PostForm) {
		data, err := u.destinationData(r.Context(), id, url.Values{"tab": {tabSettings}})
		if err != nil {
			u.fail(w, r, err)
			return
		}
		f.Origin, f.ManagedByFile, f.HasSecret = data.Edit.Origin, data.Edit.ManagedByFile, data.Edit.HasSecret
		f.Version, _ = strconv.ParseInt(r.PostFormValue("version"), 10, 64) // the version the form was read at
		data.Edit = f
		u.renderDestination(w, r, http.StatusOK, data, "")
		return
	}
	d, rowOf, local := f.destination()
	settings := map[string]any{"webhooks": d.Settings.Webhooks, "standardWebhooks": f.StandardWebhooks}
	switch {
	case f.RemoveSecret:
		settings["sharedSecret"], settings["previousSharedSecret"] = nil, nil
	case f.Secret != "":
		settings["sharedSecret"] = f.Secret
	}
	if d.Settings.Webhooks == nil {
		settings["webhooks"] = []schemas.Webhook{}
	}
	patchDelivery(settings, &d)
	patch := map[string]any{"name": f.Name, "sources": d.Sources, "settings": settings}
	if f.Name == "" {
		patch["name"] = nil
	}
	// The form's own errors and the config's, all at once: with the form's, the write is only
	// validated.
	opts := writeOptions{IfMatch: r.PostFormValue("version"), TakeOver: r.PostFormValue("takeOver") == "true", DryRun: len(local) > 0}
	_, err := u.s.updateObject(r.Context(), schemas.ConfigKindDestination, id, patch, opts, nil)
	if err == nil && len(local) > 0 {
		err = errInvalid("", "The destination was not saved: see the errors below.")
	}
	if err != nil {
		f.Errors = local
		u.showError(w, r, tabSettings, err, f, rowOf)
		return
	}
	u.redirect(w, r, destinationTab(id, tabSettings), "Destination "+id+" saved.")
}

func (u *ui) deleteDestination(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := u.s.removeObject(r.Context(), schemas.ConfigKindDestination, id, writeOptions{TakeOver: r.PostFormValue("takeOver") == "true"}); err != nil {
		u.showError(w, r, tabSettings, err, nil, nil)
		return
	}
	u.redirect(w, r, "/destinations", "Destination "+id+" deleted.")
}

// replayDestination replays the DLQ: the checked messages, or all not replayed yet.
func (u *ui) replayDestination(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, ok := u.s.deps.Store.Snapshot().DestinationByID(id); !ok {
		u.fail(w, r, errNotFound("There is no destination %q.", id))
		return
	}
	var req replayRequest
	if r.PostFormValue("replay") != "all" {
		req.MessageIDs = r.PostForm["messageIds"]
		if len(req.MessageIDs) == 0 {
			u.showError(w, r, tabDLQ, errInvalid("", "Select the messages to replay first (or replay them all)."), nil, nil)
			return
		}
	}
	ids, sk, err := u.s.replay(r.Context(), id, req)
	if err != nil {
		u.showError(w, r, tabDLQ, err, nil, nil)
		return
	}
	done := fmt.Sprintf("Replayed %s: their new attempts show in the delivery log.", plural(len(ids), "message", "messages"))
	if len(ids) == 0 {
		done = "Nothing to replay: the dead-letter queue holds no message that was not replayed yet."
	}
	if len(sk.ids) > 0 {
		done += fmt.Sprintf(" Skipped %s of a %s.", plural(len(sk.ids), "message", "messages"), sk.reason())
	}
	u.redirect(w, r, destinationTab(id, tabDLQ), done)
}

// testDestinationPage sends a test event (a disabled destination too: test it before enabling
// it) and redirects to the test tab, which shows what each URL answered (post/redirect/get: a
// reload does not send another); a refused test shows the tab with its error.
func (u *ui) testDestinationPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	typ := r.PostFormValue("type")
	out, err := u.s.runTest(r.Context(), id, testRequest{Type: typ, WhileDisabled: true})
	if err == nil {
		q := url.Values{"tab": {tabTest}, "test": {out.MessageID}, "type": {out.Type}, "at": {schemas.FormatTimestamp(out.At)}}
		headers(w)
		http.Redirect(w, r, "/destinations/"+url.PathEscape(id)+"?"+q.Encode(), http.StatusSeeOther)
		return
	}
	data, derr := u.destinationData(r.Context(), id, url.Values{"tab": {tabTest}})
	if derr != nil {
		u.fail(w, r, derr)
		return
	}
	if slices.Contains(testTypes, typ) {
		data.TestType = typ
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		u.fail(w, r, err)
		return
	}
	data.TestError = strings.TrimPrefix(ae.Message, "type: ")
	u.renderDestination(w, r, ae.Status, data, "")
}

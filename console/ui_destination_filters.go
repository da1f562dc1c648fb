package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tributary-cdp/tributary/schemas"
)

// The filters' tester on a destination's Filters tab (docs/console.md#destination-filters): paste a
// message, see which filter decided what and the body the destination would get. It runs what
// POST /v1/destinations/{id}/filters/test runs; nothing is sent, so the answer is rendered at
// once (no redirect).

// filtersBox is what the tester shows.
type filtersBox struct {
	Message string            // as typed
	Answer  *filterTestAnswer // nil before a test, or on an error
	Error   string
}

func (u *ui) testFiltersPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	data, err := u.destinationData(r.Context(), id, url.Values{"tab": {tabFilters}})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	box := &filtersBox{Message: r.PostFormValue("message")}
	data.Filters = box
	status := http.StatusOK
	if !json.Valid([]byte(box.Message)) {
		var v any
		err := json.Unmarshal([]byte(box.Message), &v)
		box.Error, status = "The message is not valid JSON: "+strings.TrimPrefix(errMessage(err), "json: ")+".", http.StatusBadRequest
	} else if out, err := runFilters(data.D, filterTestRequest{Message: json.RawMessage(box.Message)}); err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			u.fail(w, r, err)
			return
		}
		box.Error, status = ae.Message, ae.Status
	} else {
		box.Answer = out
	}
	u.renderDestination(w, r, status, data, "")
}

func errMessage(err error) string {
	if err == nil {
		return "empty"
	}
	return err.Error()
}

// The filters editor on a destination's Filters tab (docs/console.md#destination-filters): each
// filter's form, in the order the filters run, and one to add a filter. A save sends the whole
// list with that filter added, changed or removed through the config write path
// (updateObject, as PATCH /v1/destinations/{id} with filters), at the version the tab was read
// at: the config's validation decides, and its errors (an FQL error with its column) are shown
// next to the inputs. A destination a config file manages is saved only with takeOver, as on
// the Settings tab.

// The inputs of a filter's form, as keys of filterForm.Errors.
const (
	inputFilterName       = "name"
	inputFilterAction     = "action"
	inputFilterIf         = "if"
	inputFilterPercent    = "percent"
	inputFilterProperties = "properties"
	inputFilterSources    = "sources"
)

// filterForm is one filter's form (or the new filter's).
type filterForm struct {
	Key string // the name of the filter the form edits, as stored; "" for a new filter
	// Stored is that filter as stored (the form's summary), nil for a new filter.
	Stored *schemas.DestinationFilter
	Prefix string // of the inputs' ids
	Name   string
	Action string
	If     string
	// Percent (a sample's) and Properties (one path per line: dropProperties, allowProperties)
	// are read only for the actions that take them: the form shows every input.
	Percent, Properties string
	Sources             []sourceChoice // the destination's sources; none checked: all of them
	Errors              map[string]string
	Open                bool // shown unfolded: the new filter's form, or a form with errors
}

// filtersTab is the Filters tab: the editor and the tester (filtersBox).
type filtersTab struct {
	Forms         []*filterForm // in the order the filters run
	New           *filterForm
	Actions       []string
	Version       int64
	ManagedByFile bool
	Origin        string
}

// All is the filters' forms, then the new filter's.
func (t *filtersTab) All() []*filterForm { return append(slices.Clone(t.Forms), t.New) }

// filtersTabOf is the Filters tab of d at version.
func filtersTabOf(d *schemas.Destination, version int64) *filtersTab {
	tab := &filtersTab{Actions: schemas.FilterActions(), Version: version, ManagedByFile: strings.HasPrefix(d.Origin, schemas.OriginFilePrefix), Origin: d.Origin}
	for i := range d.Filters {
		tab.Forms = append(tab.Forms, filterFormOf(d, &d.Filters[i]))
	}
	// The order they run in: by action, list order within one.
	slices.SortStableFunc(tab.Forms, func(a, b *filterForm) int {
		return slices.Index(tab.Actions, a.Action) - slices.Index(tab.Actions, b.Action)
	})
	for i, f := range tab.Forms {
		f.Prefix = "filter-" + strconv.Itoa(i) + "-"
	}
	tab.New = newFilterForm(d)
	tab.New.Open = len(d.Filters) == 0 // nothing else to show
	return tab
}

// newFilterForm is the empty form of a new filter of d.
func newFilterForm(d *schemas.Destination) *filterForm {
	f := &filterForm{Prefix: "filter-new-", Action: schemas.FilterDrop, Errors: map[string]string{}}
	for _, id := range d.Sources {
		f.Sources = append(f.Sources, sourceChoice{ID: id})
	}
	return f
}

// filterFormOf is the form of d's filter fl.
func filterFormOf(d *schemas.Destination, fl *schemas.DestinationFilter) *filterForm {
	f := newFilterForm(d)
	f.Key, f.Stored, f.Name, f.Action, f.If = fl.Name, fl, fl.Name, fl.Action, fl.If
	if fl.Percent != nil {
		f.Percent = strconv.FormatFloat(*fl.Percent, 'f', -1, 64)
	}
	f.Properties = strings.Join(fl.Properties, "\n")
	f.check(fl.Sources)
	return f
}

// check checks the sources chosen; one that is not (or no longer) the destination's is kept, so
// that the config's validation names it.
func (f *filterForm) check(chosen []string) {
	for i := range f.Sources {
		f.Sources[i].Checked = slices.Contains(chosen, f.Sources[i].ID)
	}
	for _, id := range chosen {
		if !slices.ContainsFunc(f.Sources, func(s sourceChoice) bool { return s.ID == id }) {
			f.Sources = append(f.Sources, sourceChoice{ID: id, Checked: true})
		}
	}
}

// readFilterForm reads a filter's form from a POST.
func readFilterForm(d *schemas.Destination, pf url.Values) *filterForm {
	f := newFilterForm(d)
	f.Key = pf.Get("filter")
	f.Name = strings.TrimSpace(pf.Get(inputFilterName))
	f.Action = pf.Get(inputFilterAction)
	f.If = strings.TrimSpace(strings.ReplaceAll(pf.Get(inputFilterIf), "\r\n", "\n"))
	f.Percent = strings.TrimSpace(pf.Get(inputFilterPercent))
	f.Properties = strings.TrimSpace(strings.ReplaceAll(pf.Get(inputFilterProperties), "\r\n", "\n"))
	f.check(pf[inputFilterSources])
	return f
}

// filter is the filter the form describes; a percent that is no number is the form's own error
// in errs.
func (f *filterForm) filter(errs map[string]string) schemas.DestinationFilter {
	fl := schemas.DestinationFilter{Name: f.Name, Action: f.Action, If: f.If}
	for _, s := range f.Sources {
		if s.Checked {
			fl.Sources = append(fl.Sources, s.ID)
		}
	}
	switch f.Action {
	case schemas.FilterSample:
		if f.Percent == "" {
			break // the config's error: required
		}
		p, err := strconv.ParseFloat(strings.TrimSuffix(f.Percent, "%"), 64)
		if err != nil {
			errs[inputFilterPercent] = "Write a number from 0 to 100 (the share of the matching messages kept), got “" + f.Percent + "”."
			break
		}
		fl.Percent = &p
	case schemas.FilterDropProperties, schemas.FilterAllowProperties:
		for _, line := range strings.Split(f.Properties, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				fl.Properties = append(fl.Properties, line)
			}
		}
	}
	return fl
}

// filterErrors maps the config's errors to the inputs of the form of filter i (the others are
// the page's: another filter no longer valid, at most 64 filters).
func filterErrors(err error, i int) (map[string]string, string) {
	fields, general := fieldErrors(err)
	out := map[string]string{}
	var rest []string
	if general != "" {
		rest = append(rest, general)
	}
	prefix := "filters[" + strconv.Itoa(i) + "]."
	for _, field := range sortedKeys(fields) { // properties[0] before properties[1]
		msg := fields[field]
		input, _, _ := strings.Cut(strings.TrimPrefix(field, prefix), "[")
		switch {
		case !strings.HasPrefix(field, prefix):
			rest = append(rest, field+": "+msg)
		case out[input] != "":
			out[input] += "; " + msg // properties[0] and properties[2]
		default:
			out[input] = msg
		}
	}
	for input, msg := range out {
		if !slices.Contains([]string{inputFilterName, inputFilterAction, inputFilterIf, inputFilterPercent, inputFilterProperties, inputFilterSources}, input) {
			delete(out, input)
			rest = append(rest, msg)
		}
	}
	slices.Sort(rest)
	return out, strings.Join(rest, " ")
}

// saveFilterPage adds, changes (filter: its name as stored) or removes (remove) one filter of
// the destination, then shows the Filters tab again.
func (u *ui) saveFilterPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	d, ok := u.s.deps.Store.Snapshot().DestinationByID(id)
	if !ok {
		u.fail(w, r, errNotFound("There is no destination %q.", id))
		return
	}
	f := readFilterForm(d, r.PostForm)
	remove := r.PostFormValue("remove") != ""
	shown := f // the form shown again with the errors; none for a removal
	if remove {
		shown = nil
	}
	list := slices.Clone(d.Filters)
	i := len(list)
	if f.Key != "" || remove {
		if i = slices.IndexFunc(list, func(fl schemas.DestinationFilter) bool { return fl.Name == f.Key }); i < 0 {
			u.showFilterError(w, r, shown, &apiError{Status: http.StatusConflict, Code: codeVersion,
				Message: fmt.Sprintf("Destination %s has no filter %q any more: it was changed meanwhile. Read it again and re-apply your change.", id, f.Key)}, nil, "")
			return
		}
	}
	local := map[string]string{}
	var done string
	switch {
	case remove:
		list = slices.Delete(list, i, i+1)
		done = "Filter " + f.Key + " removed."
	case f.Key != "":
		list[i] = f.filter(local)
		done = "Filter " + f.Name + " saved."
	default:
		list = append(list, f.filter(local))
		done = "Filter " + f.Name + " added."
	}
	if list == nil {
		list = []schemas.DestinationFilter{}
	}
	// The form's own errors and the config's, all at once: with the form's, the write is only
	// validated.
	opts := writeOptions{IfMatch: r.PostFormValue("version"), TakeOver: r.PostFormValue("takeOver") == "true", DryRun: len(local) > 0}
	_, err := u.s.updateObject(r.Context(), schemas.ConfigKindDestination, id, map[string]any{"filters": list}, opts, nil)
	if err == nil && len(local) > 0 {
		err = errInvalid("", "The filter was not saved: see the errors below.")
	}
	if err != nil {
		fields, general := filterErrors(err, i)
		for input := range local {
			delete(fields, input) // the percent the form could not read is "required" to the config
		}
		if shown == nil {
			for _, msg := range fields {
				general = strings.TrimSpace(general + " " + msg)
			}
			fields = nil
		}
		u.showFilterError(w, r, shown, err, mergeErrors(local, fields), general)
		return
	}
	u.redirect(w, r, destinationTab(id, tabFilters), done)
}

// showFilterError shows the Filters tab again with err: the form f as sent (nil: none) with
// fields, its errors by input, and general, the page's ("The filter was not saved" when only
// the inputs have errors; err's message when neither has one).
func (u *ui) showFilterError(w http.ResponseWriter, r *http.Request, f *filterForm, err error, fields map[string]string, general string) {
	data, derr := u.destinationData(r.Context(), r.PathValue("id"), url.Values{"tab": {tabFilters}})
	if derr != nil {
		u.fail(w, r, derr)
		return
	}
	if general == "" && len(fields) > 0 {
		general = "The filter was not saved: see the errors below."
	}
	if general == "" && len(fields) == 0 {
		_, general = fieldErrors(err)
	}
	if f != nil {
		tab := data.FiltersTab
		f.Errors, f.Open = mergeErrors(fields, nil), true
		if f.Key == "" {
			tab.New = f
		} else if i := slices.IndexFunc(tab.Forms, func(g *filterForm) bool { return g.Key == f.Key }); i >= 0 {
			f.Prefix, f.Stored = tab.Forms[i].Prefix, tab.Forms[i].Stored
			tab.Forms[i] = f
		}
	}
	u.renderDestination(w, r, statusOf(err), data, general)
}

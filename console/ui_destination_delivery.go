package console

import (
	"net/url"
	"strings"

	"github.com/tributary-cdp/tributary/schemas"
)

// The delivery-control inputs of the destination forms (the setup flow's and the edit form's
// advanced options): settings.ordering (docs/delivery.md#ordering) and settings.autoDisable
// (docs/delivery.md#auto-disable). The inputs are "ordered" (a checkbox) and
// "autoDisableAfter" (a duration; empty: never).

// Inputs of the delivery-control settings, as keys of destForm.Errors.
const (
	inputOrdered          = "ordered"
	inputAutoDisableAfter = "autoDisableAfter"
)

// readDelivery reads the delivery-control inputs of a POST.
func (f *destForm) readDelivery(pf url.Values) {
	f.Ordered = pf.Get(inputOrdered) == "true"
	f.AutoDisableAfter = strings.TrimSpace(pf.Get(inputAutoDisableAfter))
}

// fillDelivery fills the delivery-control inputs from a stored destination.
func (f *destForm) fillDelivery(d *schemas.Destination) {
	f.Ordered = d.Settings.OrderedPerUser()
	f.AutoDisableAfter = ""
	if a := d.Settings.AutoDisable; a != nil {
		f.AutoDisableAfter = a.After.String()
	}
}

// applyDelivery sets the delivery-control settings of d from the inputs; a duration that does
// not parse is the form's own error in errs (one that parses is checked by the config's
// validation: at least 1s).
func (f *destForm) applyDelivery(d *schemas.Destination, errs map[string]string) {
	d.Settings.Ordering = ""
	if f.Ordered {
		d.Settings.Ordering = schemas.OrderingPerUser
	}
	d.Settings.AutoDisable = nil
	if f.AutoDisableAfter == "" {
		return
	}
	var after schemas.Duration
	if err := after.UnmarshalText([]byte(f.AutoDisableAfter)); err != nil {
		errs[inputAutoDisableAfter] = "Write a duration such as 72h or 30m (empty: never), got “" + f.AutoDisableAfter + "”."
		return
	}
	d.Settings.AutoDisable = &schemas.AutoDisable{After: after}
}

// patchDelivery adds the delivery-control settings to an edit's settings patch: set, or
// removed (null in the merge patch) when the input is cleared.
func patchDelivery(settings map[string]any, d *schemas.Destination) {
	settings["ordering"] = nil
	if d.Settings.Ordering != "" {
		settings["ordering"] = d.Settings.Ordering
	}
	settings["autoDisable"] = nil
	if a := d.Settings.AutoDisable; a != nil {
		settings["autoDisable"] = map[string]any{"after": a.After.String()}
	}
}

// deliveryInput is the form input of a config error's field ("" for another field).
func deliveryInput(field string) string {
	switch {
	case field == "settings.ordering":
		return inputOrdered
	case field == "settings.autoDisable" || strings.HasPrefix(field, "settings.autoDisable."):
		return inputAutoDisableAfter
	}
	return ""
}

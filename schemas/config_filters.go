package schemas

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tributary-cdp/tributary/schemas/fql"
)

// DestinationFilter is one of a destination's filters (docs/routing.md#destination-filters):
// for the messages its If matches (every message when If is empty), Action samples, drops, or
// removes or keeps only some fields. The router applies a destination's filters in the fixed
// order of the actions (FilterActions), whatever their order in the list.
type DestinationFilter struct {
	// Name is unique among the destination's filters; metrics and filtered records name it.
	Name string `json:"name" yaml:"name"`
	// If is an FQL condition (docs/routing.md#fql); "" matches every message (not allowed for
	// drop).
	If string `json:"if,omitempty" yaml:"if"`
	// Action is one of FilterActions.
	Action string `json:"action" yaml:"action"`
	// Percent is, for FilterSample, the share of the matching messages kept: 0 to 100.
	Percent *float64 `json:"percent,omitempty" yaml:"percent"`
	// Properties are the field paths FilterDropProperties removes or FilterAllowProperties
	// keeps (FQL paths: "context.ip", "properties.product\ 1.price").
	Properties []string `json:"properties,omitempty" yaml:"properties"`
	// Sources, when not empty, limits the filter to messages of these sources (some of the
	// destination's).
	Sources []string `json:"sources,omitempty" yaml:"sources"`
}

// The filter actions, in the order the router applies them.
const (
	FilterSample          = "sample"
	FilterDrop            = "drop"
	FilterDropProperties  = "dropProperties"
	FilterAllowProperties = "allowProperties"
)

// FilterActions returns the actions in the order the router applies them. The caller owns the
// slice.
func FilterActions() []string {
	return []string{FilterSample, FilterDrop, FilterDropProperties, FilterAllowProperties}
}

// allowedRoots are the objects whose fields an allowProperties filter chooses; the message's
// other (envelope) fields always pass.
var allowedRoots = []string{"properties", "traits", "context"}

// AppliesTo reports whether the filter applies to messages of the source.
func (f *DestinationFilter) AppliesTo(sourceID string) bool {
	return len(f.Sources) == 0 || slices.Contains(f.Sources, sourceID)
}

func (d *Destination) checkFilters(v *validator, p string) {
	if n := len(d.Filters); n > MaxFilters {
		v.addf(indexPath(fieldPath(p, "filters"), MaxFilters), "at most %d filters are allowed, got %d", MaxFilters, n)
	}
	names := map[string]string{}
	for i := range d.Filters {
		f := &d.Filters[i]
		fp := indexPath(fieldPath(p, "filters"), i)
		label := fmt.Sprintf("filter %q of destination %q", f.Name, d.ID)
		switch {
		case strings.TrimSpace(f.Name) == "":
			v.addf(fieldPath(fp, "name"), "is required")
		case names[f.Name] != "":
			v.addf(fieldPath(fp, "name"), "duplicate filter name %q (first used by %s)", f.Name, names[f.Name])
		default:
			names[f.Name] = fp
		}
		if !slices.Contains(FilterActions(), f.Action) {
			v.addf(fieldPath(fp, "action"), "must be one of %s, got %q", strings.Join(FilterActions(), ", "), f.Action)
		}
		if f.If == "" && f.Action == FilterDrop {
			v.addf(fieldPath(fp, "if"), "is required for a drop filter (it would drop every message)")
		} else if f.If != "" {
			if _, err := fql.Compile(f.If); err != nil {
				v.addf(fieldPath(fp, "if"), "%s: %s", label, err)
			}
		}
		pp := fieldPath(fp, "percent")
		switch {
		case f.Action == FilterSample && f.Percent == nil:
			v.addf(pp, "is required for a sample filter: the share of messages kept, 0 to 100")
		case f.Action == FilterSample && (*f.Percent < 0 || *f.Percent > 100 || !finite(*f.Percent)):
			v.addf(pp, "must be a number from 0 to 100, got %v", *f.Percent)
		case f.Action != FilterSample && f.Percent != nil:
			v.addf(pp, "is only for a sample filter")
		}
		propsAction := f.Action == FilterDropProperties || f.Action == FilterAllowProperties
		prp := fieldPath(fp, "properties")
		switch {
		case propsAction && len(f.Properties) == 0:
			v.addf(prp, "at least 1 field path is required for %s", f.Action)
		case !propsAction && len(f.Properties) > 0:
			v.addf(prp, "is only for dropProperties and allowProperties")
		}
		for j, path := range f.Properties {
			segs, err := fql.ParsePath(path)
			switch {
			case err != nil:
				v.addf(indexPath(prp, j), "%s: %q is not a field path: %s", label, path, err)
			case f.Action == FilterAllowProperties && (len(segs) < 2 || !slices.Contains(allowedRoots, segs[0])):
				v.addf(indexPath(prp, j), "%q: allowProperties lists fields of properties, traits or context (e.g. properties.total)", path)
			}
		}
		for j, src := range f.Sources {
			if !slices.Contains(d.Sources, src) {
				v.addf(indexPath(fieldPath(fp, "sources"), j), "%q is not one of the destination's sources", src)
			}
		}
	}
}

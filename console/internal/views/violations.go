package views

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// Violations is the tracking-plan violations view (docs/console.md#violations): per source,
// how many violations of each (event, field, type) the last 24 hours had, in hourly buckets,
// and the last few violating messages of each violation type (their ids and violations: no
// payload, so nothing of a user's is kept). Memory is bounded: at most MaxViolationKeys
// (event, field, type) entries per source and hour (the rest count under one "other" entry),
// ViolationSamples samples per type. Safe for concurrent use.
type Violations struct {
	mu      sync.Mutex
	sources map[string]*sourceViolations
}

// Bounds of the violations view.
const (
	ViolationWindow  = 24 * time.Hour
	MaxViolationKeys = 500
	ViolationSamples = 5
)

// ViolationKey is what violations are counted by.
type ViolationKey struct {
	Event string `json:"event"`
	Field string `json:"field"`
	Type  string `json:"type"`
}

// otherKey counts what is past MaxViolationKeys.
var otherKey = ViolationKey{Event: "(other)", Field: "(other)", Type: "(other)"}

type hourBucket struct {
	hour   int64 // unix hours
	counts map[ViolationKey]int
}

type sourceViolations struct {
	buckets [24]hourBucket
	samples map[string]*Ring[ViolationSample] // by violation type
}

// ViolationSample is one violating message.
type ViolationSample struct {
	MessageID  string              `json:"messageId"`
	Event      string              `json:"event,omitempty"`
	Type       string              `json:"callType"`
	At         time.Time           `json:"at"`
	Violations []schemas.Violation `json:"violations"`
}

// ViolationCount is one row of the view.
type ViolationCount struct {
	ViolationKey
	Count int `json:"count"`
}

// ViolationsView is the API's answer for one source.
type ViolationsView struct {
	Since   time.Time         `json:"since"`
	Total   int               `json:"total"`
	Counts  []ViolationCount  `json:"counts"`
	Samples []ViolationSample `json:"samples"`
}

// NewViolations returns an empty view.
func NewViolations() *Violations { return &Violations{sources: map[string]*sourceViolations{}} }

// Add records the violations of one message of source, read at at.
func (v *Violations) Add(source string, s ViolationSample) {
	if len(s.Violations) == 0 {
		return
	}
	hour := s.At.Unix() / 3600
	v.mu.Lock()
	defer v.mu.Unlock()
	sv := v.sources[source]
	if sv == nil {
		sv = &sourceViolations{samples: map[string]*Ring[ViolationSample]{}}
		v.sources[source] = sv
	}
	b := &sv.buckets[hour%int64(len(sv.buckets))]
	if b.hour != hour || b.counts == nil {
		*b = hourBucket{hour: hour, counts: map[ViolationKey]int{}}
	}
	for _, vi := range s.Violations {
		k := ViolationKey{Event: s.Event, Field: vi.Field, Type: vi.Type}
		if _, ok := b.counts[k]; !ok && len(b.counts) >= MaxViolationKeys {
			k = otherKey
		}
		b.counts[k]++
	}
	seen := map[string]bool{}
	for _, vi := range s.Violations {
		if seen[vi.Type] {
			continue
		}
		seen[vi.Type] = true
		r := sv.samples[vi.Type]
		if r == nil {
			if len(sv.samples) >= MaxViolationKeys {
				continue
			}
			r = NewRing[ViolationSample](ViolationSamples, nil)
			sv.samples[vi.Type] = r
		}
		r.Push(s)
	}
}

// Of returns the source's violations of the window that ends at now: counts, most first, and
// the samples of each type (each message once), newest first.
func (v *Violations) Of(source string, now time.Time) ViolationsView {
	out := ViolationsView{Since: now.Add(-ViolationWindow), Counts: []ViolationCount{}, Samples: []ViolationSample{}}
	v.mu.Lock()
	defer v.mu.Unlock()
	sv := v.sources[source]
	if sv == nil {
		return out
	}
	first := out.Since.Unix() / 3600
	sum := map[ViolationKey]int{}
	for _, b := range sv.buckets {
		if b.hour < first || b.counts == nil {
			continue
		}
		for k, n := range b.counts {
			sum[k] += n
			out.Total += n
		}
	}
	for k, n := range sum {
		out.Counts = append(out.Counts, ViolationCount{k, n})
	}
	slices.SortFunc(out.Counts, func(a, b ViolationCount) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Event+"\x00"+a.Field+"\x00"+a.Type, b.Event+"\x00"+b.Field+"\x00"+b.Type)
	})
	seen := map[string]bool{} // a message with violations of two types is in two rings: once here
	for _, r := range sv.samples {
		for p := range r.Newest() {
			if s := *p; !s.At.Before(out.Since) && !seen[s.MessageID] {
				seen[s.MessageID] = true
				s.Violations = slices.Clone(s.Violations)
				out.Samples = append(out.Samples, s)
			}
		}
	}
	slices.SortFunc(out.Samples, func(a, b ViolationSample) int { return b.At.Compare(a.At) })
	return out
}

// Forget drops what the view holds of a deleted source.
func (v *Violations) Forget(source string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.sources, source)
}

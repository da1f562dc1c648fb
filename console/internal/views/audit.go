package views

import (
	"strings"
	"sync"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// Audit is the last max records of tributary.audit (docs/console.md#audit-trail), oldest first,
// for GET /v1/audit and the audit page; the export reads the topic. Safe for concurrent use.
type Audit struct {
	mu      sync.RWMutex
	entries *Ring[auditEntry]
}

// auditEntry is a record of the view, its offset (the page cursor) and its time, parsed.
type auditEntry struct {
	offset int64
	rec    schemas.AuditRecord
	at     time.Time
}

// NewAudit returns a view that keeps the last max records.
func NewAudit(max int) *Audit { return &Audit{entries: NewRing[auditEntry](max, nil)} }

// Add appends rec, read at offset (in offset order), dropping the oldest beyond max.
func (v *Audit) Add(offset int64, rec schemas.AuditRecord) {
	at, _ := schemas.ParseTimestamp(rec.Time)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.entries.Push(auditEntry{offset: offset, rec: rec, at: at})
}

// Len is the number of records the view holds.
func (v *Audit) Len() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.entries.Len()
}

// AuditFilter selects records: each set field must match.
type AuditFilter struct {
	// Actor is the actor's name (case-insensitive).
	Actor string
	// Action is an action ("source.create"), or a prefix ending with a dot ("source.").
	Action string
	// Kind and ID are the object's.
	Kind, ID string
	// Since and Until bound the time: Since ≤ time < Until (zero: unbounded).
	Since, Until time.Time
}

// Match reports whether rec, made at at, matches f.
func (f *AuditFilter) Match(rec *schemas.AuditRecord, at time.Time) bool {
	switch {
	case f.Actor != "" && !strings.EqualFold(f.Actor, rec.Actor.Name),
		f.Action != "" && rec.Action != f.Action && !(strings.HasSuffix(f.Action, ".") && strings.HasPrefix(rec.Action, f.Action)),
		f.Kind != "" && f.Kind != rec.Object.Kind,
		f.ID != "" && f.ID != rec.Object.ID,
		!f.Since.IsZero() && at.Before(f.Since),
		!f.Until.IsZero() && !at.Before(f.Until):
		return false
	}
	return true
}

// Page returns up to limit records matching f, newest first, older than the offset before (-1:
// from the newest), and the cursor of the next page: the offset to pass as before (-1: none).
// The records are copies but for Before and After, which are never modified.
func (v *Audit) Page(f AuditFilter, before int64, limit int) ([]schemas.AuditRecord, int64) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := []schemas.AuditRecord{}
	last := int64(-1) // the offset of the last record of out
	for e := range v.entries.Newest() {
		if before >= 0 && e.offset >= before || !f.Match(&e.rec, e.at) {
			continue
		}
		if len(out) == limit {
			return out, last
		}
		out = append(out, e.rec)
		last = e.offset
	}
	return out, -1
}

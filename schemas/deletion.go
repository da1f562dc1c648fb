package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Deletion request kinds, after Segment's regulation types. A request without a kind is
// KindDeleteOnly.
const (
	// KindDeleteOnly sends delete notices and suppresses nothing.
	KindDeleteOnly = "DELETE_ONLY"
	// KindSuppressWithDelete sends delete notices and suppresses the user: the router drops
	// the user's later events until a KindUnsuppress request.
	KindSuppressWithDelete = "SUPPRESS_WITH_DELETE"
	// KindSuppressOnly suppresses the user without sending delete notices.
	KindSuppressOnly = "SUPPRESS_ONLY"
	// KindUnsuppress lifts a suppression; it sends no notices.
	KindUnsuppress = "UNSUPPRESS"
)

// MaxSubjectIDBytes is the longest user id a deletion request (a regulation's subject) may
// name, in bytes.
const MaxSubjectIDBytes = 1024

// CheckSubjectID reports what is wrong with the user id of a deletion request: empty, longer
// than MaxSubjectIDBytes, or holding a control character (Unicode Cc: C0 controls such as
// CR, LF and tab, DEL, C1 controls), which would forge lines in logs and notices. The console
// refuses such a subject id, and the router and audiences skip a tracking.deletions record
// with one (docs/topics.md#trackingdeletions).
func CheckSubjectID(id string) error {
	switch {
	case id == "":
		return errors.New("must not be empty")
	case len(id) > MaxSubjectIDBytes:
		return fmt.Errorf("at most %d bytes, got %d", MaxSubjectIDBytes, len(id))
	case strings.IndexFunc(id, unicode.IsControl) >= 0:
		return errors.New("must not contain control characters")
	}
	return nil
}

// DeletionRequest is the value of one tracking.deletions record, keyed by userId: a request to
// forget (and optionally suppress) one user. The console writes them; so may any producer.
type DeletionRequest struct {
	// UserID is the user to delete or suppress (required).
	UserID string `json:"userId"`
	// Kind is one of the Kind constants; empty means KindDeleteOnly.
	Kind string `json:"kind,omitempty"`
	// SourceIDs limits the request to these sources; empty means every source.
	SourceIDs []string `json:"sourceIds,omitempty"`
	// RequestID identifies the request; delete notices derive their message ids from it.
	// Empty: the router uses the record's topic, partition and offset.
	RequestID string `json:"requestId,omitempty"`
	// RequestedAt is when the request was made; it is the delete notices' timestamp. Empty:
	// the record's timestamp.
	RequestedAt string `json:"requestedAt,omitempty"`
}

// DecodeDeletionRequest decodes and checks one tracking.deletions value. Unknown fields are
// an error, so a misspelt "sourceIds" does not silently widen a deletion to every source.
func DecodeDeletionRequest(data []byte) (*DeletionRequest, time.Time, error) {
	var r DeletionRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, time.Time{}, fmt.Errorf("deletion request: %w", err)
	}
	if dec.More() {
		return nil, time.Time{}, fmt.Errorf("deletion request: data after the JSON object")
	}
	if err := CheckSubjectID(r.UserID); err != nil {
		return nil, time.Time{}, fmt.Errorf("deletion request: userId: %w", err)
	}
	switch r.Kind {
	case "":
		r.Kind = KindDeleteOnly
	case KindDeleteOnly, KindSuppressWithDelete, KindSuppressOnly, KindUnsuppress:
	default:
		return nil, time.Time{}, fmt.Errorf("deletion request: kind: %q is not one of %s, %s, %s, %s",
			r.Kind, KindDeleteOnly, KindSuppressWithDelete, KindSuppressOnly, KindUnsuppress)
	}
	var at time.Time
	if r.RequestedAt != "" {
		t, err := ParseTimestamp(r.RequestedAt)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("deletion request: requestedAt: %w", err)
		}
		at = t
	}
	return &r, at, nil
}

// Deletes reports whether the request sends delete notices.
func (r *DeletionRequest) Deletes() bool {
	return r.Kind == KindDeleteOnly || r.Kind == KindSuppressWithDelete
}

// Suppresses reports whether the request adds the user to the suppression list.
func (r *DeletionRequest) Suppresses() bool {
	return r.Kind == KindSuppressWithDelete || r.Kind == KindSuppressOnly
}

// Suppression is the value of one tracking.suppressions record, keyed by userId; a tombstone
// (nil value) lifts the suppression.
type Suppression struct {
	UserID       string `json:"userId"`
	RequestID    string `json:"requestId,omitempty"`
	SuppressedAt string `json:"suppressedAt"`
}

// Record encodes the suppression's value.
func (s Suppression) Record() []byte {
	b, _ := json.Marshal(s) // cannot fail: strings only
	return b
}

// DeletionStatus is the value of one tracking.deletions.status record, keyed by RequestID:
// what the router did with one deletion request (the router's report; the other stores write
// a DeletionReport each). It is written in the same transaction as
// the request's delete notices (at least once: in the same batch, acknowledged before the
// request's offset is committed).
type DeletionStatus struct {
	// RequestID is the request's requestId, else the id the router derived for it
	// (<topic>-<partition>-<offset>): the notices' message ids are delete-<RequestID>-<source>.
	RequestID string `json:"requestId"`
	UserID    string `json:"userId"`
	// Kind is the request's kind, KindDeleteOnly when it had none.
	Kind string `json:"kind"`
	// Notices is the number of delete notices produced: one per (source, enabled webhooks
	// destination); 0 for KindSuppressOnly and KindUnsuppress.
	Notices int `json:"notices"`
	// SuppressionWritten: the user was added to tracking.suppressions (the SUPPRESS kinds) or
	// removed from it (KindUnsuppress), acknowledged before this record was produced.
	SuppressionWritten bool `json:"suppressionWritten,omitempty"`
	// KeysShredded is the number of the user's data keys the router tombstoned on
	// tributary.keys (DELETE_ONLY and SUPPRESS_WITH_DELETE, docs/security.md#crypto-shredding):
	// every record sealed with them is unreadable from then on. 0 when the user had none, or
	// for a kind that deletes nothing.
	KeysShredded int `json:"keysShredded,omitempty"`
	// ProcessedAt is when the router processed the request (FormatTimestamp).
	ProcessedAt string `json:"processedAt"`
}

// Record encodes the status's value.
func (s DeletionStatus) Record() []byte {
	b, _ := json.Marshal(s) // cannot fail: strings, an int and a bool
	return b
}

// DecodeDeletionStatus decodes one tracking.deletions.status value. Unknown fields are
// ignored (a later router may add some); requestId is required.
func DecodeDeletionStatus(data []byte) (DeletionStatus, error) {
	var s DeletionStatus
	if err := json.Unmarshal(data, &s); err != nil {
		return DeletionStatus{}, fmt.Errorf("deletion status: %w", err)
	}
	if s.RequestID == "" {
		return DeletionStatus{}, fmt.Errorf("deletion status: requestId: required")
	}
	return s, nil
}

// The stores that report on tracking.deletions.status what they did with a deletion request
// (docs/topics.md#trackingdeletionsstatus). The router's report is its DeletionStatus, keyed by
// the request id; every other store writes a DeletionReport keyed DeletionReportKey(id, store).
const (
	StoreRouter    = "router"
	StoreAudiences = "audiences"
	StoreDeliverer = "deliverer"
	StoreConsole   = "console"
)

// Counts of a DeletionReport, by store (docs/topics.md#trackingdeletionsstatus).
const (
	// CountProfiles: audiences: profiles removed (0 or 1; a suppression marker replaces the
	// profile for the SUPPRESS kinds).
	CountProfiles = "profiles"
	// CountRedirects: audiences: merge redirects (anonymous ids merged into the user)
	// removed.
	CountRedirects = "redirects"
	// CountTombstones: audiences: tombstones written to audiences.state.
	CountTombstones = "tombstones"
	// CountDropped: deliverer: the user's waiting deliveries dropped.
	CountDropped = "dropped"
	// CountPurged: console: entries of its views purged.
	CountPurged = "purged"
)

// DeletionReport is the value of one tracking.deletions.status record of a store other than
// the router, keyed DeletionReportKey(RequestID, Store): what that store did with one deletion
// request for one user, written once it is done (audiences: in the transaction of its last
// tombstone). The console's regulation is FINISHED once every expected store reported for every
// subject (docs/console.md#regulations).
type DeletionReport struct {
	RequestID string `json:"requestId"`
	UserID    string `json:"userId"`
	// Store is one of the Store constants (or another store's name: the console shows it).
	Store string `json:"store"`
	// Kind is the request's kind.
	Kind string `json:"kind,omitempty"`
	// Counts are what the store did, by the Count constants of the store.
	Counts map[string]int64 `json:"counts,omitempty"`
	// DoneAt is when the store was done (FormatTimestamp).
	DoneAt string `json:"doneAt"`
}

// DeletionReportKey is the key of a store's DeletionReport: "<requestId>/<store>". The router's
// DeletionStatus keeps the bare request id as its key.
func DeletionReportKey(requestID, store string) string { return requestID + "/" + store }

// Record encodes the report's value.
func (r DeletionReport) Record() []byte {
	b, _ := json.Marshal(r) // cannot fail: strings and ints
	return b
}

// DecodeDeletionStatusRecord decodes one tracking.deletions.status value: a store's
// DeletionReport (it has a "store") or, without one, the router's DeletionStatus, returned as
// the router's report too. Unknown fields are ignored; requestId is required.
func DecodeDeletionStatusRecord(data []byte) (DeletionReport, *DeletionStatus, error) {
	var probe struct {
		Store *string `json:"store"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return DeletionReport{}, nil, fmt.Errorf("deletion status: %w", err)
	}
	if probe.Store == nil {
		st, err := DecodeDeletionStatus(data)
		if err != nil {
			return DeletionReport{}, nil, err
		}
		// Every number of the router's status is one of its counts (notices, and those a later
		// router adds), a true flag counts 1.
		var fields map[string]any
		_ = json.Unmarshal(data, &fields) // decoded above
		counts := map[string]int64{}
		for k, v := range fields {
			switch v := v.(type) {
			case float64:
				counts[k] = int64(v)
			case bool:
				if v {
					counts[k] = 1
				}
			}
		}
		return DeletionReport{RequestID: st.RequestID, UserID: st.UserID, Store: StoreRouter, Kind: st.Kind,
			Counts: counts, DoneAt: st.ProcessedAt}, &st, nil
	}
	var r DeletionReport
	if err := json.Unmarshal(data, &r); err != nil {
		return DeletionReport{}, nil, fmt.Errorf("deletion report: %w", err)
	}
	switch {
	case r.RequestID == "":
		return DeletionReport{}, nil, errors.New("deletion report: requestId: required")
	case r.Store == "":
		return DeletionReport{}, nil, errors.New("deletion report: store: required")
	}
	return r, nil, nil
}

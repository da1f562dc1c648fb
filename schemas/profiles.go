package schemas

import "encoding/json"

// The profile API of the audiences service (docs/audiences.md#profile-api): its requests and
// answers, served by the audiences service and read by the console's client (and by one
// audiences instance asking another).

// ProfileView is the answer of GET /v1/profiles/{id}.
type ProfileView struct {
	UserID         string                     `json:"userId,omitempty"`
	AnonymousID    string                     `json:"anonymousId,omitempty"`
	Traits         json.RawMessage            `json:"traits"`
	ComputedTraits map[string]json.RawMessage `json:"computedTraits"`
	Audiences      []AudienceRef              `json:"audiences"`
	FirstSeen      string                     `json:"firstSeen,omitempty"`
	LastSeen       string                     `json:"lastSeen,omitempty"`
	// MergedIDs are the ids (anonymous, or an alias's previous id) merged into the profile.
	MergedIDs []string `json:"mergedIds,omitempty"`
	// ExternalIDs are the profile's external ids (email, context.externalIds entries), and
	// Identity its last merges and refusals (docs/audiences.md#identity-resolution).
	ExternalIDs []ExternalIDView    `json:"externalIds,omitempty"`
	Identity    []IdentityEventView `json:"identity,omitempty"`
}

// ExternalIDView is one external id of a profile.
type ExternalIDView struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	LinkedAt string `json:"linkedAt,omitempty"`
}

// IdentityEventView is one merge or refusal recorded on a profile: which id, which rule,
// when.
type IdentityEventView struct {
	At   string `json:"at"`
	Kind string `json:"kind"` // merge, refusal
	Type string `json:"type,omitempty"`
	ID   string `json:"id,omitempty"`
	Rule string `json:"rule,omitempty"` // refusals: blocked, limit, maxMerges, taken, suppressed
	// Other is the profile merged in, or the one holding the refused id.
	Other  string `json:"other,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// AudienceRef names an audience a profile belongs to.
type AudienceRef struct {
	ID  string `json:"id"`
	Key string `json:"key"`
}

// AudienceView is the answer of GET /v1/audiences/{id}.
type AudienceView struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Key        string `json:"key"`
	Source     string `json:"source"`
	Realtime   bool   `json:"realtime"`
	Members    int    `json:"members"`
	LastSyncAt string `json:"lastSyncAt,omitempty"`
	// LastSync counts the joins and leaves the last sync of each partition sent.
	LastSync struct {
		Joins  int `json:"joins"`
		Leaves int `json:"leaves"`
	} `json:"lastSync"`
	// Partitions is how many of the Total partitions the figures cover: fewer while a
	// partition is being restored, or when another instance could not be asked.
	Partitions int  `json:"partitions"`
	Total      int  `json:"totalPartitions"`
	Partial    bool `json:"partial,omitempty"`
	// Backfill is the progress of the audience's backfill (docs/audiences.md#backfill);
	// absent for an audience whose rule reads no aggregate (nothing to backfill).
	Backfill *BackfillView `json:"backfill,omitempty"`
}

// BackfillView is the progress of the backfill of a definition from tracking.events'
// retention, over the partitions Partitions of AudienceView covers.
type BackfillView struct {
	// State is "running" until every partition is done, then "done".
	State          string `json:"state"`
	PartitionsDone int    `json:"partitionsDone"`
	Partitions     int    `json:"partitions"`
	// EventsRead are the records read so far by the running backfills.
	EventsRead int64 `json:"eventsRead"`
	// From and To are the times of the oldest and newest records read (empty before any).
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}

// MembersPage is the answer of GET /v1/audiences/{id}/members.
type MembersPage struct {
	Data []Member `json:"data"`
	// Next is the cursor of the next page; empty on the last.
	Next string `json:"next,omitempty"`
}

// Member is one member of an audience.
type Member struct {
	UserID      string `json:"userId,omitempty"`
	AnonymousID string `json:"anonymousId,omitempty"`
}

// PreviewRequest is the body of POST /v1/audiences/preview.
type PreviewRequest struct {
	// Rule is a rule as in an audience of the config (docs/audiences.md#rules).
	Rule json.RawMessage `json:"rule"`
	// Now, when set, is the time the rule is evaluated at (a timestamp); default: now.
	Now string `json:"now,omitempty"`
}

// PreviewView is the answer of POST /v1/audiences/preview.
type PreviewView struct {
	// Count is how many profiles match the rule at At; Profiles how many profiles there are.
	Count    int    `json:"count"`
	Profiles int    `json:"profiles"`
	At       string `json:"at"`
	// Partitions of Total: see AudienceView.
	Partitions int  `json:"partitions"`
	Total      int  `json:"totalPartitions"`
	Partial    bool `json:"partial,omitempty"`
	// NewAggregate: an event condition of the rule has a where that no audience or computed
	// trait of the config counts yet; it counts no event before it is saved (no backfill).
	NewAggregate bool `json:"newAggregate,omitempty"`
}

// ProfileAPIError is the body of every non-2xx answer of the profile API.
type ProfileAPIError struct {
	// Code is a short machine-readable name: not_found, unauthorized, bad_request, too_large,
	// unavailable...
	Code    string `json:"code"`
	Message string `json:"message"`
}

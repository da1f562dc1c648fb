package audiences

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// Identity resolution on external ids (docs/audiences.md#identity-resolution).
//
// A profile is keyed by its userId or anonymousId, as before. An external id (an email of the
// identify traits or of context.traits, an entry of context.externalIds) is a key of its own,
// extKey(type, value), whose entry is a redirect to the profile that claimed it first: a
// "link" hand-off to the id's partition claims it. A second profile carrying the same id is
// joined to the first: a "join" hand-off to the first profile's partition checks the identity
// rules there and, when they allow it, merges one profile into the other by the merge and
// absorb hand-offs of docs/audiences.md#merging-profiles, exactly once as they are. A refusal is
// recorded on the profiles concerned ("note" hand-offs), counted, never silent.

// Identity rule names: the rule label of tributary_audiences_identity_refusals_total and the
// rule of a refusal recorded on a profile.
const (
	ruleBlocked   = "blocked"
	ruleLimit     = "limit"
	ruleMaxMerges = "maxMerges"
	ruleTaken     = "taken" // an anonymous id already merged into another user (the user_id limit)
)

// identityLogKept bounds the merges and refusals a profile remembers (the last ones).
const identityLogKept = 20

// extPrefix starts the key of an external id's entry, which cannot be a user or anonymous id
// of a valid message (a control character).
const extPrefix = "\x1f"

// extKey is the profile key of the external id typ:value: the value is hashed (SHA-256, 128
// bits in base64url), so that neither audiences.state's keys nor the hand-offs carry an email
// in clear.
func extKey(typ, value string) string {
	sum := sha256.Sum256([]byte(value))
	var buf [64]byte
	k := append(append(append(buf[:0], extPrefix...), typ...), ':')
	return string(base64.RawURLEncoding.AppendEncode(k, sum[:16]))
}

// entryValue is the profile an external id's entry leads to, from its audiences.state value
// (opened): {"mergedInto":<id>} (earlier versions also wrote "id" and "recent"); ok is false
// for any other key or value.
func entryValue(key string, value []byte) (into string, ok bool) {
	if !strings.HasPrefix(key, extPrefix) {
		return "", false
	}
	const head, tail = `{"mergedInto":"`, `"}`
	if bytes.HasPrefix(value, []byte(head)) && bytes.HasSuffix(value, []byte(tail)) {
		if v := value[len(head) : len(value)-len(tail)]; bytes.IndexByte(v, '\\') < 0 && bytes.IndexByte(v, '"') < 0 && utf8.Valid(v) && !hasControl(v) && len(v) > 0 {
			return string(v), true
		}
	}
	var r struct {
		MergedInto string `json:"mergedInto"`
	}
	if json.Unmarshal(value, &r) != nil || r.MergedInto == "" {
		return "", false
	}
	return r.MergedInto, true
}

// identity is what a profile knows of its external ids: nil until it has one or has merged.
type identity struct {
	// IDs are the external ids the profile claimed (email, custom types), oldest first.
	IDs []extID `json:"ids,omitempty"`
	// Merges counts the profiles merged into this one (their own merges included).
	Merges int `json:"merges,omitempty"`
	// Log is the last identityLogKept merges and refusals, oldest first.
	Log []idEvent `json:"log,omitempty"`
}

// extID is one external id of a profile.
type extID struct {
	Type  string `json:"t"`
	Value string `json:"v"`
	At    int64  `json:"at"` // ms, when it was linked
}

// idEvent is one merge or refusal recorded on a profile.
type idEvent struct {
	At   int64  `json:"at"`   // ms
	Kind string `json:"kind"` // "merge" or "refusal"
	// Type and Value: the id that caused the merge, or that was refused.
	Type  string `json:"t,omitempty"`
	Value string `json:"v,omitempty"`
	// Rule: the rule that refused (refusals).
	Rule string `json:"rule,omitempty"`
	// Other: the profile merged into this one, or the profile the refused id belongs to.
	Other string `json:"other,omitempty"`
	// Detail says why, for people.
	Detail string `json:"detail,omitempty"`
}

func (p *profile) ident() *identity {
	if p.Identity == nil {
		p.Identity = &identity{}
	}
	return p.Identity
}

// hasID reports whether p claimed typ:value.
func (p *profile) hasID(typ, value string) bool {
	if p.Identity == nil {
		return false
	}
	for _, e := range p.Identity.IDs {
		if e.Type == typ && e.Value == value {
			return true
		}
	}
	return false
}

// dropID removes typ:value from p's ids.
func (p *profile) dropID(typ, value string) {
	if p.Identity != nil {
		p.Identity.IDs = slices.DeleteFunc(p.Identity.IDs, func(e extID) bool { return e.Type == typ && e.Value == value })
	}
}

// countIDs is how many external ids of typ p holds that were linked at or after since (ms;
// 0: ever).
func (p *profile) countIDs(typ string, since int64) int {
	n := 0
	if p.Identity != nil {
		for _, e := range p.Identity.IDs {
			if e.Type == typ && e.At >= since {
				n++
			}
		}
	}
	return n
}

// record adds e to p's identity log, unless it repeats a refusal already there.
func (p *profile) record(e idEvent) bool {
	x := p.ident()
	if e.Kind == "refusal" {
		for _, l := range x.Log {
			if l.Kind == e.Kind && l.Rule == e.Rule && l.Type == e.Type && l.Value == e.Value && l.Other == e.Other {
				return false
			}
		}
	}
	if len(x.Log) >= identityLogKept {
		x.Log = slices.Delete(x.Log, 0, 1)
	}
	x.Log = append(x.Log, e)
	return true
}

// absorbIdentity adds o's ids, merges and log to p's (absorb).
func (p *profile) absorbIdentity(o *profile) {
	if o.Identity == nil {
		return
	}
	for _, e := range o.Identity.IDs {
		if !p.hasID(e.Type, e.Value) {
			p.ident().IDs = append(p.ident().IDs, e)
		}
	}
	p.ident().Merges += o.Identity.Merges
	for _, e := range o.Identity.Log {
		p.record(e)
	}
	slices.SortStableFunc(p.Identity.Log, func(a, b idEvent) int { return int(a.At - b.At) })
}

// Id types: user_id and anonymous_id are the message's own (not in identity.IDs).
const (
	idUserID      = "user_id"
	idAnonymousID = "anonymous_id"
	idEmail       = "email"
)

// identityRules are the identity resolution rules (AUDIENCES_IDENTITY_*, with the config's
// identity section over them; docs/audiences.md#identity-rules), compiled by compileRules.
type identityRules struct {
	blocked   func(value string) bool // compileBlocked
	limits    map[string]int          // by type; "*": every other type
	window    int64                   // ms; 0: ever
	priority  map[string]int          // by type: lower is higher priority; unlisted: after every listed
	maxMerges int
	// types are the external id types that identify: Segment's default identifiers and the
	// types named in the priority or the limits.
	types map[string]bool
	// blockedBy and maxMergesBy name where the rule was set, for refusals' details: the
	// setting's variable, or the config's field.
	blockedBy, maxMergesBy string
	// from is the config's rules these were compiled with (nil: the settings alone).
	from *schemas.IdentityRules
}

// defaultIDTypes are Segment's default identifiers besides user_id and anonymous_id; a custom
// type identifies once named in the priority or the limits.
var defaultIDTypes = []string{idEmail, "android.id", "android.idfa", "android.push_token", "ga_client_id", "ios.id", "ios.idfa", "ios.push_token"}

// Where a rule comes from, for errors and refusals' details.
const (
	fromBlockedSetting   = "AUDIENCES_IDENTITY_BLOCKED"
	fromMaxMergesSetting = "AUDIENCES_IDENTITY_MAX_MERGES"
	fromBlockedConfig    = "identity.blocked of the config"
	fromMaxMergesConfig  = "identity.maxMerges of the config"
)

// compileRules compiles the identity settings of c with the config's rules x over them (nil:
// none): each rule x gives replaces its setting. Errors name the bad variable or field.
func compileRules(c *Config, x *schemas.IdentityRules) (*identityRules, error) {
	r := &identityRules{limits: map[string]int{}, priority: map[string]int{}, window: c.IdentityWindow.Milliseconds(),
		maxMerges: c.IdentityMaxMerges, blockedBy: fromBlockedSetting, maxMergesBy: fromMaxMergesSetting, from: x}
	if x == nil {
		x = &schemas.IdentityRules{}
	}
	expr, what := c.IdentityBlocked, fromBlockedSetting
	if e, ok := x.BlockedExpression(); ok {
		expr, what, r.blockedBy = e, fromBlockedConfig, fromBlockedConfig
	}
	var err error
	if r.blocked, err = compileBlocked(expr); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	what = "AUDIENCES_IDENTITY_LIMITS"
	if x.Limits != nil {
		what, r.window = "identity.limits of the config", time.Duration(x.Limits.Window).Milliseconds()
		maps.Copy(r.limits, x.Limits.PerType) // checked when the config was read (schemas)
	} else {
		for _, kv := range strings.Split(c.IdentityLimits, ",") {
			kv = strings.TrimSpace(kv)
			if kv == "" {
				continue
			}
			typ, n, ok := strings.Cut(kv, ":")
			limit, err := strconv.Atoi(strings.TrimSpace(n))
			if !ok || typ == "" || err != nil || limit < 1 {
				return nil, fmt.Errorf("%s: want type:limit (a limit of at least 1), comma-separated, e.g. user_id:1,email:5,*:5; got %q", what, kv)
			}
			r.limits[strings.TrimSpace(typ)] = limit
		}
	}
	if l, ok := r.limits[idUserID]; ok && l != 1 {
		return nil, fmt.Errorf("%s: user_id: a profile has one user id (its key); got %d", what, l)
	}
	r.limits[idUserID] = 1
	priority, what := c.IdentityPriority, "AUDIENCES_IDENTITY_PRIORITY"
	if len(x.Priority) > 0 {
		priority, what = x.Priority, "identity.priority of the config"
	}
	for i, typ := range priority {
		typ = strings.TrimSpace(typ)
		if _, dup := r.priority[typ]; dup || typ == "" {
			return nil, fmt.Errorf("%s: %q is empty or listed twice", what, typ)
		}
		r.priority[typ] = i
	}
	r.types = map[string]bool{}
	for _, t := range defaultIDTypes {
		r.types[t] = true
	}
	for t := range r.priority {
		r.types[t] = true
	}
	for t := range r.limits {
		r.types[t] = t != "*"
	}
	delete(r.types, idUserID)
	delete(r.types, idAnonymousID)
	if x.MaxMerges > 0 {
		r.maxMerges, r.maxMergesBy = x.MaxMerges, fromMaxMergesConfig
	}
	if r.maxMerges < 1 {
		return nil, fmt.Errorf("%s: must be at least 1, got %d", r.maxMergesBy, r.maxMerges)
	}
	if r.window < 0 {
		return nil, fmt.Errorf("AUDIENCES_IDENTITY_WINDOW: must be 0 (ever) or more, got %s", c.IdentityWindow)
	}
	return r, nil
}

// compileBlocked is the test of AUDIENCES_IDENTITY_BLOCKED: for the default expression a
// comparison with its few values (it runs on every new id: a regular expression costs more than
// the rest of the check), else the expression, compiled once.
func compileBlocked(expr string) (func(value string) bool, error) {
	if expr == DefaultIdentityBlocked {
		return defaultBlocked, nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	return re.MatchString, nil
}

// defaultBlockedWords are DefaultIdentityBlocked's words, matched in any case.
var defaultBlockedWords = []string{"null", "nil", "none", "undefined", "anonymous", "unknown"}

// defaultBlocked is DefaultIdentityBlocked's match without the regular expression
// (TestDefaultBlocked keeps the two equal): empty, only zeroes and dashes, -1, or one of its
// words in any case (Unicode simple folding, as (?i): the Kelvin sign is a k).
func defaultBlocked(v string) bool {
	if strings.Trim(v, "0-") == "" || v == "-1" {
		return true
	}
	if len(v) > 3*len("anonymous") || strings.IndexByte(v, '@') >= 0 { // an email is never one
		return false
	}
	for _, w := range defaultBlockedWords {
		if strings.EqualFold(v, w) {
			return true
		}
	}
	return false
}

// limit is the limit of typ; 0: none.
func (r *identityRules) limit(typ string) int {
	if l, ok := r.limits[typ]; ok {
		return l
	}
	return r.limits["*"]
}

// rank is typ's priority: lower is higher.
func (r *identityRules) rank(typ string) int {
	if i, ok := r.priority[typ]; ok {
		return i
	}
	return len(r.priority)
}

// since is the start of the limits' window at now (ms; 0: ever).
func (r *identityRules) since(now int64) int64 {
	if r.window == 0 {
		return 0
	}
	return now - r.window
}

// messageIDs calls f with each external id a message carries: the email of an identify's
// traits and of context.traits, and the entries of context.externalIds of the types that
// identify. It reads nothing of a message without them, and allocates nothing for an email
// (value aliases the message until copied).
func messageIDs(m *schemas.Message, types map[string]bool, f func(typ string, value []byte)) {
	if m.Type == schemas.TypeIdentify && bytes.Contains(m.Traits, []byte(`"email"`)) {
		if v := stringMember(m.Traits, idEmail); len(v) > 0 {
			f(idEmail, v)
		}
	}
	if len(m.Context) == 0 || (!bytes.Contains(m.Context, []byte(`"externalIds"`)) && !bytes.Contains(m.Context, []byte(`"email"`))) {
		return
	}
	var ctx struct {
		Traits struct {
			Email json.RawMessage `json:"email"`
		} `json:"traits"`
		ExternalIDs []struct {
			ID         json.RawMessage `json:"id"`
			Type       string          `json:"type"`
			Collection string          `json:"collection"`
		} `json:"externalIds"`
	}
	if json.Unmarshal(m.Context, &ctx) != nil {
		return
	}
	if v, ok := schemas.JSONString(ctx.Traits.Email); ok && len(v) > 0 {
		f(idEmail, v)
	}
	for _, e := range ctx.ExternalIDs {
		if !types[e.Type] || (e.Collection != "" && e.Collection != "users") {
			continue // the message's own ids (user_id, anonymous_id), or a type that does not identify
		}
		if v, ok := schemas.JSONString(e.ID); ok && len(v) > 0 {
			f(e.Type, v)
		}
	}
}

// stringMember is the text of the string member key of a JSON object (nil if absent or not a
// string; the last one when repeated, as encoding/json).
func stringMember(obj []byte, key string) []byte {
	var v []byte
	_ = schemas.EachMember(obj, func(k, raw []byte) error {
		if string(k) == key {
			v, _ = schemas.JSONString(raw)
		}
		return nil
	})
	return v
}

// linkExternalIDs is identity on external ids: each id of the message that prof has not
// claimed is checked against the rules and, when allowed, claimed through a link hand-off to
// the id's partition (docs/audiences.md#identity-resolution).
func (s *Service) linkExternalIDs(b *batch, p int32, part *partition, prof *profile, m *schemas.Message, at int64) {
	r := s.rules.Load()
	messageIDs(m, r.types, func(typ string, raw []byte) {
		if prof.hasIDBytes(typ, raw) {
			return
		}
		value := string(raw)
		switch {
		case r.blocked(value):
			s.refuse(b, p, part, prof, idEvent{Type: typ, Value: value, Rule: ruleBlocked, Detail: "the value is blocked (" + r.blockedBy + ")"})
			return
		case r.limit(typ) > 0 && prof.countIDs(typ, r.since(b.now)) >= r.limit(typ):
			s.refuse(b, p, part, prof, idEvent{Type: typ, Value: value, Rule: ruleLimit,
				Detail: fmt.Sprintf("the profile has %d %s already (limit %d)", prof.countIDs(typ, r.since(b.now)), typ, r.limit(typ))})
			return
		}
		prof.ident().IDs = append(prof.ident().IDs, extID{Type: typ, Value: value, At: at})
		b.touch(p, part, prof.ID)
		key := extKey(typ, value)
		q := s.partitionOf(key)
		if q == p {
			// The id's entry is on the profile's own partition: claimed here, in this
			// transaction, as its link would be when read back (no record).
			s.claim(b, p, part, key, prof.ID, func() *idSummary { return summaryOf(prof, key) })
			return
		}
		s.addLink(b, q, key, &op{Op: opLink, From: key, Into: prof.ID, sumOf: prof})
	})
}

// linkGroup is one audiences.repartition record of a batch carrying its links for one
// partition: rec is in b.out, its value written by encodeLinks from links (linksHead, then n
// link objects, comma-separated); seen is how much of b.out was checked for other records to
// the partition.
type linkGroup struct {
	rec   *kgo.Record
	links []byte
	n     int
	seen  int
}

// addLink hands o (a link of the id key) to the id's partition: in the record of this batch's
// links for that partition when no other record for it was written since, else in a record of
// its own, so that a partition reads its hand-offs in the order they were made. A poll's new
// ids make a few records rather than one each (docs/topics.md#audiencesrepartition).
func (s *Service) addLink(b *batch, q int32, key string, o *op) {
	if g := b.links[q]; g != nil {
		open := true
		for _, r := range b.out[min(g.seen, len(b.out)):] {
			if r != g.rec && r.Partition == q && r.Topic == s.cfg.RepartitionTopic {
				open = false
				break
			}
		}
		if open {
			g.links, g.n, g.seen = o.appendLinkJSON(append(g.links, ',')), g.n+1, len(b.out)
			return
		}
	}
	g := &linkGroup{rec: &kgo.Record{Topic: s.cfg.RepartitionTopic, Partition: q, Key: []byte(key)}, n: 1,
		links: o.appendLinkJSON(append(make([]byte, 0, 1024), linksHead...))}
	b.out = append(b.out, g.rec)
	g.seen = len(b.out)
	if b.links == nil {
		b.links = map[int32]*linkGroup{}
	}
	b.links[q] = g
	b.groups = append(b.groups, g)
}

// encodeLinks writes the values of the batch's link records: one link as a link op (as
// before), more as a links op, in the buffer the links were written to (linksHead first: no
// copy either way).
func (b *batch) encodeLinks() {
	for _, g := range b.groups {
		if g.n == 1 {
			g.rec.Value = g.links[len(linksHead):]
			continue
		}
		g.rec.Value = append(g.links, "]}"...)
	}
	b.links, b.groups = nil, nil
}

// linksHead starts a links op (appendLinksJSON).
const linksHead = `{"op":"links","links":[`

// hasIDBytes is hasID of a value not yet a string.
func (p *profile) hasIDBytes(typ string, value []byte) bool {
	if p.Identity == nil {
		return false
	}
	for _, e := range p.Identity.IDs {
		if e.Type == typ && e.Value == string(value) {
			return true
		}
	}
	return false
}

// idByKey is p's external id whose key (extKey) is key.
func (p *profile) idByKey(key string) (extID, bool) {
	if p.Identity != nil {
		for _, e := range p.Identity.IDs {
			if extKey(e.Type, e.Value) == key {
				return e, true
			}
		}
	}
	return extID{}, false
}

// refuse records a refusal on prof (in partition p) and counts it.
func (s *Service) refuse(b *batch, p int32, part *partition, prof *profile, e idEvent) {
	e.Kind, e.At = "refusal", b.now
	if prof.record(e) {
		s.metrics.refusals.WithLabelValues(e.Rule).Inc()
		b.touch(p, part, prof.ID)
	}
}

// idSummary is what a join needs of the profile that asks to join: its user id, its ids (by
// key: no value of an external id travels in clear on audiences.repartition), its merges.
type idSummary struct {
	UserID string  `json:"userId,omitempty"`
	IDs    []sumID `json:"ids,omitempty"`
	Merges int     `json:"merges,omitempty"`
}

// sumID is an external id of a summary: its type, its key (extKey) and when it was linked.
type sumID struct {
	Type string `json:"t"`
	Key  string `json:"k"`
	At   int64  `json:"at"`
}

// summaryOf is p's summary; last is the key of p's last id (its link's, hashed already).
func summaryOf(p *profile, last string) *idSummary {
	sm := &idSummary{UserID: p.userID()}
	if p.Identity != nil {
		sm.Merges = p.Identity.Merges
		sm.IDs = make([]sumID, 0, len(p.Identity.IDs))
		for i, e := range p.Identity.IDs {
			key := last
			if i < len(p.Identity.IDs)-1 || last == "" {
				key = extKey(e.Type, e.Value)
			}
			sm.IDs = append(sm.IDs, sumID{Type: e.Type, Key: key, At: e.At})
		}
	}
	return sm
}

// Identity hand-offs (audiences.repartition ops).
const (
	// link: claim the external id whose key is From for the profile Into.
	opLink = "link"
	// join: the profile From (Summary) carries the external id whose key is Via, claimed by
	// Into.
	opJoin = "join"
	// note: record Note on the profile Into and drop from it the external id whose key is Via.
	opNote = "note"
	// links: several links for one partition, in order (Links).
	opLinks = "links"
)

// applyLink claims the external id o.From for o.Into, or, when another profile claimed it
// first, asks that profile to join o.Into (a join on its partition).
func (s *Service) applyLink(b *batch, p int32, part *partition, o *op) {
	s.claim(b, p, part, o.From, o.Into, o.summary)
}

// summary is o's Summary, decoded from sumRaw the first time it is asked for (a link's summary
// is read only when its id was claimed by another profile: a join).
func (o *op) summary() *idSummary {
	if o.Summary == nil && o.sumRaw != nil {
		sm, err := decodeSummary(o.sumRaw, linkString, linkInt)
		if err != nil { // a shape decodeSummary leaves to encoding/json
			sm = &idSummary{}
			_ = json.Unmarshal(o.sumRaw, sm)
		}
		o.Summary, o.sumRaw = sm, nil
	}
	return o.Summary
}

// claim claims the external id whose key is key (on partition p) for the profile into, or,
// when another profile claimed it first, asks that profile to join into (summary: into's, made
// only then).
func (s *Service) claim(b *batch, p int32, part *partition, key, into string, summary func() *idSummary) {
	claimer, ok := part.entries[key]
	switch {
	case !ok:
		part.setEntry(key, into)
		s.metrics.profiles.Inc()
		b.touch(p, part, key)
	case claimer == into:
	default:
		b.out = append(b.out, s.handOff(claimer, op{Op: opJoin, From: into, Into: claimer, Via: key, Summary: summary()}))
	}
}

// keyType is the type of the external id whose key is key.
func keyType(key string) string {
	typ, _, _ := strings.Cut(strings.TrimPrefix(key, extPrefix), ":")
	return typ
}

// applyJoin decides, on the partition of o.Into (which claimed the id o.Via first), whether
// the profile o.From joins it: the rules are checked over the ids of both; a refusal is
// recorded on both, a merge goes through merge and absorb hand-offs.
func (s *Service) applyJoin(b *batch, p int32, part *partition, o *op) {
	q := part.profiles[o.Into]
	switch {
	case o.From == o.Into:
		return
	case q == nil:
		// The profile that claimed the id is gone (deleted): its stale entry goes and the id
		// is claimed again, by the newcomer.
		b.out = append(b.out, s.handOff(o.Via, op{Op: opForget, From: o.Via, Into: o.Into}),
			s.handOff(o.Via, op{Op: opLink, From: o.Via, Into: o.From, Summary: o.Summary}))
		return
	case q.Suppressed:
		e := idEvent{At: b.now, Kind: "refusal", Type: keyType(o.Via), Rule: "suppressed", Detail: "the id belongs to a suppressed user"}
		s.metrics.refusals.WithLabelValues(e.Rule).Inc()
		b.out = append(b.out, s.handOff(o.From, op{Op: opNote, Into: o.From, Via: o.Via, Note: &e}))
		return
	case q.mergedInto() == o.From:
		return // joined already
	case q.mergedInto() != "": // merged meanwhile: the profile it leads to decides
		b.out = append(b.out, s.handOff(q.mergedInto(), op{Op: opJoin, From: o.From, Into: q.mergedInto(), Via: o.Via, Summary: o.Summary}))
		return
	}
	via, ok := q.idByKey(o.Via)
	if !ok {
		via = extID{Type: keyType(o.Via)}
	}
	sm := o.Summary
	if sm == nil {
		sm = &idSummary{}
	}
	r := s.rules.Load()
	refuse := func(rule, detail string) {
		e := idEvent{Type: via.Type, Value: via.Value, Rule: rule, Other: o.From, Detail: detail}
		s.refuse(b, p, part, q, e)
		e.Other, e.Kind, e.At, e.Value = o.Into, "refusal", b.now, ""
		b.out = append(b.out, s.handOff(o.From, op{Op: opNote, Into: o.From, Via: o.Via, Note: &e}))
	}
	if q.userID() != "" && sm.UserID != "" && q.userID() != sm.UserID {
		refuse(ruleLimit, fmt.Sprintf("the %s is %s's; merging %s and %s would give the profile 2 user_id (limit 1)", via.Type, o.Into, q.userID(), sm.UserID))
		return
	}
	if n := q.ident().Merges + sm.Merges + 1; n > r.maxMerges {
		refuse(ruleMaxMerges, fmt.Sprintf("merging %s would make %d merges (AUDIENCES_IDENTITY_MAX_MERGES %d)", o.From, n, r.maxMerges))
		return
	}
	// Per type, the ids of both over the limit: the id that links them (Via) is dropped when
	// its type's priority is not above the type over its limit; else the merge goes on and the
	// joining profile's ids of that type are dropped (docs/audiences.md#identity-resolution).
	since := r.since(b.now)
	held := map[string]bool{}
	if q.Identity != nil {
		for _, e := range q.Identity.IDs {
			held[extKey(e.Type, e.Value)] = true
		}
	}
	added := map[string]int{}
	var drop []sumID
	for _, e := range sm.IDs {
		if e.Key == o.Via || held[e.Key] || e.At < since {
			continue
		}
		added[e.Type]++
		l := r.limit(e.Type)
		if l == 0 || q.countIDs(e.Type, since)+added[e.Type] <= l {
			continue
		}
		if r.rank(via.Type) >= r.rank(e.Type) {
			refuse(ruleLimit, fmt.Sprintf("merging %s would give the profile more than %d %s, and %s is not of a higher priority", o.From, l, e.Type, via.Type))
			return
		}
		drop = append(drop, e)
	}
	// The merge: an anonymous profile joins an identified one, else the one that joins is
	// merged into the one that claimed the id first.
	from, into := o.From, o.Into
	if q.userID() == "" && sm.UserID != "" {
		from, into = o.Into, o.From
	}
	for _, e := range drop {
		ev := idEvent{Kind: "refusal", At: b.now, Type: e.Type, Rule: ruleLimit, Other: o.Into,
			Detail: fmt.Sprintf("dropped from the merge by the %s: over the limit of %s (%d), of lower priority", via.Type, e.Type, r.limit(e.Type))}
		s.metrics.refusals.WithLabelValues(ruleLimit).Inc()
		b.out = append(b.out, s.handOff(o.From, op{Op: opNote, Into: o.From, Via: e.Key, Note: &ev}))
		// The dropped id's claim goes: it no longer leads to the merged profile.
		b.out = append(b.out, s.handOff(e.Key, op{Op: opForget, From: e.Key, Into: o.From}))
	}
	if from == o.Into {
		s.applyMerge(b, p, part, &op{Op: opMerge, From: from, Into: into, Via: o.Via})
		return
	}
	b.out = append(b.out, s.handOff(from, op{Op: opMerge, From: from, Into: into, Via: o.Via}))
}

// applyNote records o.Note on the profile o.Into (following a redirect) and drops from it the
// external id whose key is o.Via (its value, known there, completes the note).
func (s *Service) applyNote(b *batch, p int32, part *partition, o *op) {
	prof := part.profiles[o.Into]
	switch {
	case prof == nil || prof.Suppressed || o.Note == nil:
		return
	case prof.mergedInto() != "":
		b.out = append(b.out, s.handOff(prof.mergedInto(), op{Op: opNote, Into: prof.mergedInto(), Via: o.Via, Note: o.Note}))
		return
	}
	// An external id is dropped; an anonymous id stays among the merged ids (as before: its
	// deletion hands on to it, and the refusal says it is another user's).
	if strings.HasPrefix(o.Via, extPrefix) {
		if e, ok := prof.idByKey(o.Via); ok {
			o.Note.Value = e.Value
			prof.dropID(e.Type, e.Value)
		}
	}
	prof.record(*o.Note)
	b.touch(p, part, o.Into)
}

// mergeAllowed checks the rules for merging the id other (of type typ, an anonymousId or an
// alias's previousId) into prof, recording a refusal.
func (s *Service) mergeAllowed(b *batch, p int32, part *partition, prof *profile, typ, other string) bool {
	r := s.rules.Load()
	switch {
	case r.blocked(other):
		s.refuse(b, p, part, prof, idEvent{Type: typ, Value: other, Rule: ruleBlocked, Detail: "the value is blocked (" + r.blockedBy + ")"})
		return false
	case prof.Identity != nil && prof.Identity.Merges >= r.maxMerges:
		s.refuse(b, p, part, prof, idEvent{Type: typ, Value: other, Rule: ruleMaxMerges,
			Detail: fmt.Sprintf("the profile has %d merges (%s)", prof.Identity.Merges, r.maxMergesBy)})
		return false
	}
	return true
}

// refusedMerge records, on the profile o.Into, a merge of o.From refused because o.From is
// merged into another profile already (the first identified user keeps an anonymous id: the
// user_id limit) or suppressed.
func (s *Service) refusedMerge(b *batch, o *op, from *profile) []*kgo.Record {
	if from.mergedInto() == o.Into || strings.HasPrefix(o.From, extPrefix) {
		return b.out
	}
	typ, value, via := idAnonymousID, o.From, idAnonymousID+":"+o.From
	switch {
	case strings.HasPrefix(o.Via, extPrefix): // an external id's merge: its value is known on Into
		typ, value, via = keyType(o.Via), "", o.Via
	case o.Via != "":
		typ, value, _ = strings.Cut(o.Via, ":")
	}
	e := &idEvent{At: b.now, Kind: "refusal", Type: typ, Value: value, Rule: ruleTaken, Other: from.mergedInto(),
		Detail: o.From + " is merged into " + from.mergedInto() + " already: a profile has one user_id (the first identified user keeps an id)"}
	if from.Suppressed {
		e.Rule, e.Other, e.Detail = "suppressed", "", o.From+" is suppressed"
	}
	s.metrics.refusals.WithLabelValues(e.Rule).Inc()
	return append(b.out, s.handOff(o.Into, op{Op: opNote, Into: o.Into, Via: via, Note: e}))
}

// recordMerge records on prof the merge of o.Profile (an absorb), by the id o.Via.
func (s *Service) recordMerge(b *batch, prof *profile, o *op) {
	prof.ident().Merges++
	e := idEvent{At: b.now, Kind: "merge", Other: o.Profile.ID}
	switch {
	case strings.HasPrefix(o.Via, extPrefix):
		e.Type = keyType(o.Via)
		if id, ok := prof.idByKey(o.Via); ok {
			e.Value = id.Value
		}
	case o.Via != "":
		e.Type, e.Value, _ = strings.Cut(o.Via, ":")
	default:
		e.Value = o.Profile.ID
	}
	prof.record(e)
	s.metrics.merges.Inc()
}

// appendJSON appends x's JSON, as encoding/json writes it from the struct tags (the changelog
// is written on every change of a profile: no reflection; TestIdentityJSON keeps the two equal).
func (x *identity) appendJSON(b []byte) []byte {
	b = append(b, '{')
	n := len(b)
	if len(x.IDs) > 0 {
		b = append(b, `"ids":[`...)
		for i, e := range x.IDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"t":`...)
			b = schemas.AppendJSONString(b, e.Type)
			b = append(b, `,"v":`...)
			b = schemas.AppendJSONString(b, e.Value)
			b = append(b, `,"at":`...)
			b = strconv.AppendInt(b, e.At, 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if x.Merges != 0 {
		if len(b) > n {
			b = append(b, ',')
		}
		b = append(b, `"merges":`...)
		b = strconv.AppendInt(b, int64(x.Merges), 10)
	}
	if len(x.Log) > 0 {
		if len(b) > n {
			b = append(b, ',')
		}
		b = append(b, `"log":[`...)
		for i, e := range x.Log {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"at":`...)
			b = strconv.AppendInt(b, e.At, 10)
			b = append(b, `,"kind":`...)
			b = schemas.AppendJSONString(b, e.Kind)
			b = appendStringField(b, "t", e.Type)
			b = appendStringField(b, "v", e.Value)
			b = appendStringField(b, "rule", e.Rule)
			b = appendStringField(b, "other", e.Other)
			b = appendStringField(b, "detail", e.Detail)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendLinkJSON appends a link op's JSON, as encoding/json writes it from op's struct tags
// (members op, from, into, via, summary; TestLinkOpJSON keeps the two equal): a link is
// written for every new external id, reflection would be most of its cost.
func (o *op) appendLinkJSON(b []byte) []byte {
	b = append(b, `{"op":`...)
	b = schemas.AppendJSONString(b, o.Op)
	b = appendStringField(b, "from", o.From)
	b = appendStringField(b, "into", o.Into)
	b = appendStringField(b, "via", o.Via)
	switch {
	case o.sumOf != nil: // summaryOf(o.sumOf, o.From), written from the profile
		p := o.sumOf
		var ids []extID
		merges := 0
		if p.Identity != nil {
			ids, merges = p.Identity.IDs, p.Identity.Merges
		}
		b = appendSummaryJSON(b, p.userID(), merges, len(ids), func(b []byte, i int) []byte {
			key := o.From
			if i < len(ids)-1 || o.From == "" {
				key = extKey(ids[i].Type, ids[i].Value)
			}
			return appendSumIDJSON(b, ids[i].Type, key, ids[i].At)
		})
	case o.Summary != nil:
		sm := o.Summary
		b = appendSummaryJSON(b, sm.UserID, sm.Merges, len(sm.IDs), func(b []byte, i int) []byte {
			return appendSumIDJSON(b, sm.IDs[i].Type, sm.IDs[i].Key, sm.IDs[i].At)
		})
	}
	return append(b, '}')
}

// appendSummaryJSON appends ,"summary":{…} of a summary with n ids, each appended by id.
func appendSummaryJSON(b []byte, userID string, merges, n int, id func(b []byte, i int) []byte) []byte {
	b = append(b, `,"summary":{`...)
	start := len(b)
	if userID != "" {
		b = append(b, `"userId":`...)
		b = schemas.AppendJSONString(b, userID)
	}
	if n > 0 {
		if len(b) > start {
			b = append(b, ',')
		}
		b = append(b, `"ids":[`...)
		for i := range n {
			if i > 0 {
				b = append(b, ',')
			}
			b = id(b, i)
		}
		b = append(b, ']')
	}
	if merges != 0 {
		if len(b) > start {
			b = append(b, ',')
		}
		b = append(b, `"merges":`...)
		b = strconv.AppendInt(b, int64(merges), 10)
	}
	return append(b, '}')
}

// appendSumIDJSON appends one id of a summary: {"t":…,"k":…,"at":…}.
func appendSumIDJSON(b []byte, typ, key string, at int64) []byte {
	b = append(b, `{"t":`...)
	b = schemas.AppendJSONString(b, typ)
	b = append(b, `,"k":`...)
	b = schemas.AppendJSONString(b, key)
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, at, 10)
	return append(b, '}')
}

// errNotLink stops decodeLinkOp at what it leaves to encoding/json.
var errNotLink = errors.New("not a plain link")

// decodeLinkOp decodes a link op written by appendLinkJSON without reflection; ok is false for
// any other record, or a link of another shape (a member it does not know, a null): those are
// encoding/json's, which decodes them the same (TestLinkOpJSON).
func decodeLinkOp(value []byte) (o op, ok bool) {
	return o, decodeLinkInto(value, &o)
}

// decodeLinkInto is decodeLinkOp into *o (an element of a links op's list: nothing else is
// allocated for it).
func decodeLinkInto(value []byte, o *op) bool {
	if !bytes.HasPrefix(value, []byte(`{"op":"link",`)) {
		return false
	}
	str := linkString
	err := schemas.EachMember(value, func(k, v []byte) error {
		switch string(k) {
		case "op":
			return str(v, &o.Op)
		case "from":
			return str(v, &o.From)
		case "into":
			return str(v, &o.Into)
		case "via":
			return str(v, &o.Via)
		case "summary":
			if !checkSummary(v) {
				return errNotLink // a shape decodeSummary does not read: encoding/json's
			}
			o.sumRaw = v // decoded when needed (summary)
			return nil
		}
		return errNotLink
	})
	return err == nil && o.Op == opLink
}

// linkString reads a string member of a link or its summary: a key of an external id
// without encoding/json (plainKey), the op and the usual type without allocating.
func linkString(raw []byte, dst *string) error {
	if rest, ok := plainKey(raw); ok {
		*dst = extPrefix + string(rest)
		return nil
	}
	v, ok := schemas.JSONString(raw)
	if !ok {
		return errNotLink
	}
	switch string(v) {
	case idEmail:
		*dst = idEmail
	case opLink:
		*dst = opLink
	default:
		*dst = string(v)
	}
	return nil
}

// linkInt reads an integer member of a link's summary.
func linkInt(raw []byte, dst *int64) (err error) {
	*dst, err = strconv.ParseInt(string(raw), 10, 64)
	return err
}

// plainKey is the text after "\u001f" of a JSON string that is a key of an external id
// written as appendLinkJSON writes it ("\u001f" then no escape, valid UTF-8); ok is false for
// any other string (schemas.JSONString's: the escape makes it decode with encoding/json).
func plainKey(raw []byte) (rest []byte, ok bool) {
	const esc = `"\u001f`
	if len(raw) > len(esc) && string(raw[:len(esc)]) == esc && raw[len(raw)-1] == '"' {
		if rest := raw[len(esc) : len(raw)-1]; bytes.IndexByte(rest, '\\') < 0 && bytes.IndexByte(rest, '"') < 0 && utf8.Valid(rest) && !hasControl(rest) {
			return rest, true
		}
	}
	return nil, false
}

// hasControl reports whether b holds a byte JSON must escape (then raw was not valid JSON).
func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// checkSummary reports whether decodeSummary reads v, without allocating what it would (a
// link's summary is decoded only when a join needs it, op.summary).
func checkSummary(v []byte) bool {
	str := func(raw []byte) error {
		if _, ok := plainKey(raw); ok {
			return nil
		}
		if _, ok := schemas.JSONString(raw); !ok {
			return errNotLink
		}
		return nil
	}
	num := func(raw []byte) error {
		_, err := strconv.ParseInt(string(raw), 10, 64)
		return err
	}
	if len(v) == 0 || v[0] != '{' {
		return false
	}
	return schemas.EachMember(v, func(k, v []byte) error {
		switch string(k) {
		case "userId":
			return str(v)
		case "merges":
			return num(v)
		case "ids":
			return schemas.EachElement(v, func(v []byte) error {
				return schemas.EachMember(v, func(k, v []byte) error {
					switch string(k) {
					case "t", "k":
						return str(v)
					case "at":
						return num(v)
					}
					return errNotLink
				})
			})
		}
		return errNotLink
	}) == nil
}

// decodeSummary is decodeLinkOp's decoding of a summary.
func decodeSummary(v []byte, str func([]byte, *string) error, num func([]byte, *int64) error) (*idSummary, error) {
	sm := &idSummary{}
	err := schemas.EachMember(v, func(k, v []byte) error {
		switch string(k) {
		case "userId":
			return str(v, &sm.UserID)
		case "merges":
			var n int64
			err := num(v, &n)
			sm.Merges = int(n)
			return err
		case "ids":
			sm.IDs = make([]sumID, 0, 2) // [] is an empty list, as encoding/json decodes it
			return schemas.EachElement(v, func(v []byte) error {
				var e sumID
				err := schemas.EachMember(v, func(k, v []byte) error {
					switch string(k) {
					case "t":
						return str(v, &e.Type)
					case "k":
						return str(v, &e.Key)
					case "at":
						return num(v, &e.At)
					}
					return errNotLink
				})
				sm.IDs = append(sm.IDs, e)
				return err
			})
		}
		return errNotLink
	})
	return sm, err
}

// appendLinksJSON appends a links op's JSON, as encoding/json writes it: {"op":"links",
// "links":[link, ...]}.
func appendLinksJSON(b []byte, links []op) []byte {
	b = append(b, `{"op":"links","links":[`...)
	for i := range links {
		if i > 0 {
			b = append(b, ',')
		}
		b = links[i].appendLinkJSON(b)
	}
	return append(b, "]}"...)
}

// decodeLinksOp decodes a links op written by appendLinksJSON without reflection; ok false as
// decodeLinkOp's.
func decodeLinksOp(value []byte) (o op, ok bool) {
	if !bytes.HasPrefix(value, []byte(`{"op":"links",`)) {
		return o, false
	}
	err := schemas.EachMember(value, func(k, v []byte) error {
		switch string(k) {
		case "op":
			if string(v) != `"links"` {
				return errNotLink
			}
			o.Op = opLinks
			return nil
		case "links":
			o.Links = make([]op, 0, bytes.Count(v, []byte(`{"op":"link",`)))
			return schemas.EachElement(v, func(v []byte) error {
				o.Links = append(o.Links, op{})
				if !decodeLinkInto(v, &o.Links[len(o.Links)-1]) {
					return errNotLink
				}
				return nil
			})
		}
		return errNotLink
	})
	return o, err == nil
}

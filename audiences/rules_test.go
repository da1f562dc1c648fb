package audiences

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestBetweenEdges: an event condition with between: [older, newer] counts the events of the
// buckets from the minute of now-older (included) to the minute of now-newer (excluded), with
// the errors of docs/audiences.md#between-windows at each edge.
func TestBetweenEdges(t *testing.T) {
	hourAligned := time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC).UnixMilli()
	tests := []struct {
		name    string
		between string
		now     int64
		at      int64 // the event's time, relative to now
		want    bool
	}{
		// Minute buckets (both bounds within 24 hours).
		{"[2h, 1h], exactly at the older bound", "[2h, 1h]", testNow, -2 * hour, true},
		{"[2h, 1h], a minute before the older bound", "[2h, 1h]", testNow, -2*hour - minute, false},
		{"[2h, 1h], a millisecond before the older bound", "[2h, 1h]", testNow, -2*hour - 1, false},
		{"[2h, 1h], in the middle", "[2h, 1h]", testNow, -90 * minute, true},
		{"[2h, 1h], a minute before the newer bound", "[2h, 1h]", testNow, -hour - minute, true},
		{"[2h, 1h], a millisecond before the newer bound", "[2h, 1h]", testNow, -hour - 1, true},
		{"[2h, 1h], exactly at the newer bound (not counted)", "[2h, 1h]", testNow, -hour, false},
		{"[2h, 1h], just now", "[2h, 1h]", testNow, 0, false},
		// now inside a minute: both bounds' minutes are taken whole.
		{"[2h, 1h], now at :30s, 20s before the older bound", "[2h, 1h]", testNow + 30_000, -2*hour - 20_000, true},
		{"[2h, 1h], now at :30s, 20s before the newer bound (missed, documented)", "[2h, 1h]", testNow + 30_000, -hour - 20_000, false},
		{"[2h, 1h], now at :30s, 31s before the newer bound", "[2h, 1h]", testNow + 30_000, -hour - 31_000, true},
		{"[2h, 1h], now at :30s, 20s after the newer bound", "[2h, 1h]", testNow + 30_000, -hour + 20_000, false},
		// Hour buckets, now on the hour: exact to the hour.
		{"[90d, 30d] on the hour, exactly at the older bound", "[90d, 30d]", hourAligned, -90 * day, true},
		{"[90d, 30d] on the hour, a minute before the older bound", "[90d, 30d]", hourAligned, -90*day - minute, false},
		{"[90d, 30d] on the hour, 60 days ago", "[90d, 30d]", hourAligned, -60 * day, true},
		{"[90d, 30d] on the hour, a minute before the newer bound", "[90d, 30d]", hourAligned, -30*day - minute, true},
		{"[90d, 30d] on the hour, exactly at the newer bound", "[90d, 30d]", hourAligned, -30 * day, false},
		{"[90d, 30d] on the hour, 29 days ago", "[90d, 30d]", hourAligned, -29 * day, false},
		// now at 12:30: both bounds fall inside the hour bucket 12:00, which belongs to the
		// older side: the first 30 minutes after the older bound are missed, and up to 29
		// minutes after the newer bound still count (documented).
		{"[48h, 30h] at :30, exactly at the older bound (missed, documented)", "[48h, 30h]", testNow, -48 * hour, false},
		{"[48h, 30h] at :30, 30 minutes after the older bound", "[48h, 30h]", testNow, -48*hour + 30*minute, true},
		{"[48h, 30h] at :30, a minute before the newer bound", "[48h, 30h]", testNow, -30*hour - minute, true},
		{"[48h, 30h] at :30, 29 minutes after the newer bound (counted, documented)", "[48h, 30h]", testNow, -30*hour + 29*minute, true},
		{"[48h, 30h] at :30, 30 minutes after the newer bound", "[48h, 30h]", testNow, -30*hour + 30*minute, false},
		// A newer bound of 0 is a within.
		{"[1h, 0s], just now", "[1h, 0s]", testNow, 0, true},
		{"[1h, 0s], a minute before the older bound", "[1h, 0s]", testNow, -hour - minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The event is processed when it happened; a second one, now (never inside the
			// window unless the newer bound is 0), compacts the series as the service does.
			m := ruleModel(t, "{event: Order Completed, between: "+tt.between+"}", "")
			atLeast := 1
			if tt.between == "[1h, 0s]" {
				atLeast = 2
				m = ruleModel(t, "{event: Order Completed, atLeast: 2, between: "+tt.between+"}", "")
			}
			p := newProfile()
			at := tt.now + tt.at
			track(m, p, "Order Completed", `{}`, at, at)
			track(m, p, "Order Completed", `{}`, tt.now, tt.now)
			if got := m.audiences[0].root.eval(p, tt.now); got != tt.want {
				t.Errorf("event at now%+dms, between %s (atLeast %d): counted = %v, want %v (buckets %+v)", tt.at, tt.between, atLeast, got, tt.want, p.events()[0].Buckets)
			}
			// The same with a where filter, which reads an aggregate's series.
			mw := ruleModel(t, "{event: Order Completed, atLeast: "+strconv.Itoa(atLeast)+", between: "+tt.between+", where: [{property: total, gt: 10}]}", "")
			q := newProfile()
			track(mw, q, "Order Completed", `{"total":20}`, at, at)
			track(mw, q, "Order Completed", `{"total":20}`, tt.now, tt.now)
			if got := mw.audiences[0].root.eval(q, tt.now); got != tt.want {
				t.Errorf("with where: counted = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLapsedCustomers: "ordered 30 to 90 days ago but not in the last 30 days", Segment's
// between example, as an all of a between and an atMost 0 within.
func TestLapsedCustomers(t *testing.T) {
	m := ruleModel(t, `{all: [{event: Order Completed, between: [90d, 30d]}, {event: Order Completed, atMost: 0, within: 30d}]}`, "")
	tests := []struct {
		name   string
		orders []int64 // relative to testNow
		want   bool
	}{
		{"ordered 60 days ago only", []int64{-60 * day}, true},
		{"ordered 60 days ago and yesterday", []int64{-60 * day, -day}, false},
		{"ordered yesterday only", []int64{-day}, false},
		{"ordered 100 days ago only", []int64{-100 * day}, false},
		{"never ordered", nil, false},
	}
	for _, tt := range tests {
		p := newProfile()
		for _, o := range tt.orders {
			track(m, p, "Order Completed", `{}`, testNow+o, testNow+o)
		}
		if got := m.audiences[0].root.eval(p, testNow); got != tt.want {
			t.Errorf("%s: lapsed = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestAudienceConditions: an audience condition holds when the profile is a member of the
// other audience at the same moment, follows that audience's membership as it changes, nests
// (an audience of an audience of audiences), negates with not, and never holds for an
// audience that is not in the model.
func TestAudienceConditions(t *testing.T) {
	m := compileYAML(t, `
audiences:
  - {id: pro, name: Pro, source: engage, rule: {trait: plan, equals: pro}}
  - {id: buyers, name: Buyers, source: engage, rule: {event: Order Completed, within: 720h}}
  - {id: pro-buyers, name: Pro Buyers, source: engage, realtime: true, rule: {all: [{audience: pro}, {audience: buyers}]}}
  - {id: not-pro, name: Not Pro, source: engage, rule: {not: {audience: pro}}}
  - {id: vip, name: VIP, source: engage, rule: {any: [{audience: pro-buyers}, {trait: vip, equals: true}]}}
`)
	p := newProfile()
	member := func(id string) bool { return m.audienceByID(id).root.eval(p, testNow) }
	check := func(step string, want map[string]bool) {
		t.Helper()
		for _, id := range slices.Sorted(func(yield func(string) bool) {
			for k := range want {
				if !yield(k) {
					return
				}
			}
		}) {
			if got := member(id); got != want[id] {
				t.Errorf("%s: member of %s = %v, want %v", step, id, got, want[id])
			}
		}
	}
	check("a new profile", map[string]bool{"pro": false, "buyers": false, "pro-buyers": false, "not-pro": true, "vip": false})
	p.mergeTraits(json.RawMessage(`{"plan":"pro"}`), nil)
	check("plan pro", map[string]bool{"pro": true, "buyers": false, "pro-buyers": false, "not-pro": false, "vip": false})
	track(m, p, "Order Completed", `{}`, testNow-day, testNow-day)
	check("plan pro and an order", map[string]bool{"pro": true, "buyers": true, "pro-buyers": true, "not-pro": false, "vip": true})
	if !m.audienceByID("pro-buyers").root.eval(p, testNow+29*day) || m.audienceByID("pro-buyers").root.eval(p, testNow+31*day) {
		t.Error("pro-buyers does not follow buyers' window")
	}
	p.mergeTraits(json.RawMessage(`{"plan":"free"}`), nil)
	check("plan free", map[string]bool{"pro": false, "buyers": true, "pro-buyers": false, "not-pro": true, "vip": false})

	// A record naming an audience no longer in the config (not validated here): never holds.
	gone := compile([]*schemas.Audience{{ID: "x", Name: "X", Source: "engage", Rule: schemas.Rule{Audience: "gone"}}}, nil)
	if gone.audiences[0].root.eval(p, testNow) {
		t.Error("an audience condition naming an unknown audience holds")
	}
}

// TestAudienceOutputs follows one profile through audiences with each output and checks the
// calls each sync and realtime sync sends, in order: identify for output identify (and
// absent), "Audience Entered" / "Audience Exited" track events for track, both for both;
// the exact track payload; a rename of a track audience (Exited under the old key first); a
// removed track audience (Exited once, from the partition's metadata). The messageIds are
// distinct UUIDs.
func TestAudienceOutputs(t *testing.T) {
	const v1 = `
audiences:
  - {id: idy, name: Identify Only, source: engage, rule: {trait: plan, equals: pro}}
  - {id: trk, name: Track Only, source: engage, output: track, rule: {trait: plan, equals: pro}}
  - {id: both, name: Both, source: engage, output: both, rule: {trait: plan, equals: pro}}
  - {id: rt, name: Realtime Track, source: engage, output: track, realtime: true, rule: {trait: plan, equals: free}}
`
	const v2 = `
audiences:
  - {id: idy, name: Identify Only, source: engage, rule: {trait: plan, equals: pro}}
  - {id: trk, name: Track Renamed, source: engage, output: track, rule: {trait: plan, equals: pro}}
`
	s, part, setConfig := outputService(t)
	setConfig(v1)
	now := time.Date(2026, 11, 24, 7, 11, 0, 12_000_000, time.UTC).UnixMilli()
	msgs := 0
	message := func(raw string) []*kgo.Record {
		t.Helper()
		msgs++
		m, err := schemas.DecodeMessage([]byte(raw[:len(raw)-1] + `,"messageId":"m` + strconv.Itoa(msgs) + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.refreshModel()
		b := &batch{now: now, touched: map[int32]*partition{}}
		s.handleMessage(b, 0, part, m, nil, "", time.UnixMilli(now))
		part.dirty = nil
		return b.out
	}
	sync := func() []*kgo.Record {
		t.Helper()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.refreshModel()
		b := &batch{now: now, touched: map[int32]*partition{}}
		out := s.syncPartition(b, 0, part)
		part.dirty = nil
		return out
	}
	ids := map[string]bool{}
	calls := func(out []*kgo.Record) []string {
		t.Helper()
		var got []string
		for _, r := range out {
			if r.Topic != s.cfg.EventsTopic {
				continue
			}
			var m struct {
				Type, MessageID, Event string
				Traits, Properties     map[string]json.RawMessage
			}
			if err := json.Unmarshal(r.Value, &m); err != nil {
				t.Fatalf("a call that does not decode: %v: %s", err, r.Value)
			}
			if hdr(r, schemas.HeaderType) != m.Type || hdr(r, schemas.HeaderMessageID) != m.MessageID || hdr(r, HeaderOrigin) != OriginAudiences {
				t.Errorf("headers %v of %s", r.Headers, r.Value)
			}
			if ids[m.MessageID] {
				t.Errorf("messageId %s sent twice", m.MessageID)
			}
			ids[m.MessageID] = true
			if msg, err := schemas.DecodeMessage(r.Value); err != nil || msg.Validate() != nil {
				t.Errorf("not a valid message: %v: %s", err, r.Value)
			}
			switch m.Type {
			case "identify":
				for k, v := range m.Traits {
					got = append(got, "identify "+k+"="+string(v))
				}
			case "track":
				got = append(got, fmt.Sprintf("%s %s=%s (audience_key %s)", m.Event, keyOf(m.Properties), propOf(m.Properties), m.Properties["audience_key"]))
			}
		}
		return got
	}
	check := func(step string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: sent\n%q\nwant\n%q", step, got, want)
		}
	}

	check("plan pro, realtime", calls(message(`{"type":"identify","userId":"u1","traits":{"plan":"pro"}}`)), nil)
	out := sync()
	check("first sync", calls(out), []string{
		"identify both=true", `Audience Entered both=true (audience_key "both")`,
		"identify identify_only=true",
		`Audience Entered track_only=true (audience_key "track_only")`,
	})
	// The exact track payload, and its record.
	var trk *kgo.Record
	for _, r := range out {
		if hdr(r, schemas.HeaderType) == "track" && regexp.MustCompile(`"track_only":true`).Match(r.Value) {
			trk = r
		}
	}
	if trk == nil {
		t.Fatal("no track call of trk")
	}
	msgID := hdr(trk, schemas.HeaderMessageID)
	want := `{"type":"track","messageId":"` + msgID + `","userId":"u1","event":"Audience Entered",` +
		`"properties":{"audience_key":"track_only","track_only":true},` +
		`"timestamp":"2026-11-24T07:11:00.012Z","receivedAt":"2026-11-24T07:11:00.012Z",` +
		`"context":{"library":{"name":"tributary-audiences","version":"` + platform.Version + `"},` +
		`"personas":{"computation_class":"audience","computation_id":"trk","computation_key":"track_only","audience_id":"trk","audience_key":"track_only"}}}`
	if string(trk.Value) != want {
		t.Errorf("track payload:\n%s\nwant\n%s", trk.Value, want)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(msgID) {
		t.Errorf("messageId %q is not a UUID", msgID)
	}
	if string(trk.Key) != "u1" || hdr(trk, schemas.HeaderSourceID) != "engage" {
		t.Errorf("record key %q, source-id %q", trk.Key, hdr(trk, schemas.HeaderSourceID))
	}
	check("sync with nothing changed", calls(sync()), nil)

	check("plan free, realtime", calls(message(`{"type":"identify","userId":"u1","traits":{"plan":"free"}}`)),
		[]string{`Audience Entered realtime_track=true (audience_key "realtime_track")`})
	check("sync after plan free", calls(sync()), []string{
		"identify both=false", `Audience Exited both=false (audience_key "both")`,
		"identify identify_only=false",
		`Audience Exited track_only=false (audience_key "track_only")`,
	})
	check("plan pro again, realtime", calls(message(`{"type":"identify","userId":"u1","traits":{"plan":"pro"}}`)),
		[]string{`Audience Exited realtime_track=false (audience_key "realtime_track")`})
	check("sync after plan pro", calls(sync()), []string{
		"identify both=true", `Audience Entered both=true (audience_key "both")`,
		"identify identify_only=true",
		`Audience Entered track_only=true (audience_key "track_only")`,
	})

	setConfig(v2)
	check("sync after the config change", calls(sync()), []string{
		// trk renamed while a member: Exited under the old key, then Entered under the new.
		`Audience Exited track_only=false (audience_key "track_only")`,
		`Audience Entered track_renamed=true (audience_key "track_renamed")`,
		// both: removed, Exited and false once from the metadata.
		"identify both=false", `Audience Exited both=false (audience_key "both")`,
	})
	check("sync after the config change, again", calls(sync()), nil)
	if md := part.meta.Defs["a/trk"]; md.Output != schemas.OutputTrack || md.Key != "track_renamed" {
		t.Errorf("metadata of trk: %+v", md)
	}
	if md := part.meta.Defs["a/idy"]; md.Output != "" {
		t.Errorf("metadata of idy: %+v, want no output (identify)", md)
	}
}

// TestAudienceOutputVersions: an audience's version does not change with output identify
// (absent or written), so that the audiences of a config from before outputs are not synced
// again; another output is a new version.
func TestAudienceOutputVersions(t *testing.T) {
	v := func(output string) string {
		return compile([]*schemas.Audience{{ID: "a", Name: "A", Source: "engage", Output: output, Rule: schemas.Rule{Trait: "plan", Comparison: schemas.Comparison{Equals: "pro"}}}}, nil).audiences[0].version
	}
	if v("") != v(schemas.OutputIdentify) {
		t.Error("output identify changes the version")
	}
	if v("") != version("A", "engage", schemas.Rule{Trait: "plan", Comparison: schemas.Comparison{Equals: "pro"}}) {
		t.Error("the version of an audience without output is not the one from before outputs")
	}
	if v(schemas.OutputTrack) == v("") || v(schemas.OutputBoth) == v(schemas.OutputTrack) {
		t.Error("another output is the same version")
	}
}

func hdr(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// keyOf is the property of an audience track event other than audience_key.
func keyOf(props map[string]json.RawMessage) string {
	for k := range props {
		if k != "audience_key" {
			return k
		}
	}
	return ""
}

func propOf(props map[string]json.RawMessage) string { return string(props[keyOf(props)]) }

// outputService is a service on one partition, without a broker, whose config setConfig sets
// (a new version each time).
func outputService(t *testing.T) (*Service, *partition, func(string)) {
	t.Helper()
	snap := &versionedSnapshot{}
	setConfig := func(y string) {
		t.Helper()
		cfg, err := schemas.ParseConfig([]byte("sources: [{id: engage, writeKey: wk2}]\n"+y), schemas.ConfigFormatYAML)
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			t.Fatal(err)
		}
		snap.cfg, snap.version = cfg, snap.version+1
	}
	c := DefaultConfig()
	c.Addr, c.Token = "127.0.0.1:0", "audiences-test-token-0123456789"
	s, err := New(c, Deps{
		Deps: platform.Deps{
			Kafka:  platform.KafkaSettings{Brokers: []string{"127.0.0.1:1"}, ReplicationFactor: -1, Partitions: 1},
			Logger: zerolog.Nop(),
		}, Config: func() Snapshot { return *snap },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.producer.Close)
	t.Cleanup(s.lag.Close)
	part := &partition{restored: true, profiles: map[string]*profile{}, meta: partMeta{Defs: map[string]metaDef{}}}
	s.nparts, s.parts[0] = 1, part
	return s, part, setConfig
}

// BenchmarkEventWindow compares an event condition's within and between windows over a full
// counter (an event every minute for the last 24 hours and every hour for 89 days before):
// the cost of a between window (docs/audiences.md#between-windows).
func BenchmarkEventWindow(b *testing.B) {
	for _, rule := range []string{"{event: E, within: 30d}", "{event: E, between: [90d, 30d]}", "{event: E, between: [2h, 1h]}"} {
		b.Run(rule, func(b *testing.B) {
			m := ruleModel(b, rule, "")
			p := newProfile()
			for at := testNow - 90*day; at <= testNow; {
				track(m, p, "E", `{}`, at, testNow)
				if at < testNow-day {
					at += hour
				} else {
					at += minute
				}
			}
			root := m.audiences[0].root
			b.ResetTimer()
			for range b.N {
				root.eval(p, testNow)
			}
		})
	}
}

package audiences

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// versionedSnapshot is a config snapshot a test changes: each set is a new version.
type versionedSnapshot struct {
	staticSnapshot
	version uint64
}

func (s versionedSnapshot) Version() uint64 { return s.version }

// TestSyncOfAProfile follows one profile through messages and config changes and checks what
// each sync sends (the identify calls' trait, in order), what the realtime sync after a
// message sends, what the profile keeps of it, and the sync's figures: a join, a leave, a
// computed trait's new value, a realtime audience sent at once and a non-realtime one left to
// the sync, an audience renamed while the profile is a member (false under the old key
// first), an audience removed from the config (false once, from the partition's metadata)
// and a computed trait removed (forgotten without a call).
func TestSyncOfAProfile(t *testing.T) {
	const v1 = `
audiences:
  - {id: all, name: All, source: engage, rule: {trait: plan, exists: true}}
  - {id: pro, name: Pro, source: engage, rule: {trait: plan, equals: pro}}
  - {id: rt, name: RT, source: engage, realtime: true, rule: {trait: plan, equals: free}}
computedTraits:
  - {id: n, name: Orders, source: engage, count: {event: Order Completed}}
`
	const v2 = `
audiences:
  - {id: rt, name: Free Users, source: engage, realtime: true, rule: {trait: plan, equals: free}}
`
	snap := &versionedSnapshot{}
	setConfig := func(y string) {
		t.Helper()
		cfg, err := schemas.ParseConfig([]byte("sources: [{id: engage, writeKey: wk2}]\n"+y), schemas.ConfigFormatYAML)
		if err != nil {
			t.Fatal(err)
		}
		snap.cfg, snap.version = cfg, snap.version+1
	}
	setConfig(v1)
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
	defer s.producer.Close()
	defer s.lag.Close()
	part := &partition{restored: true, profiles: map[string]*profile{}, meta: partMeta{Defs: map[string]metaDef{}}}
	s.nparts, s.parts[0] = 1, part
	now := time.Now().UnixMilli()

	calls := func(out []*kgo.Record) []string {
		t.Helper()
		var got []string
		for _, r := range out {
			if r.Topic != c.EventsTopic {
				continue
			}
			var m struct {
				Traits map[string]json.RawMessage `json:"traits"`
			}
			if err := json.Unmarshal(r.Value, &m); err != nil {
				t.Fatalf("an identify call that does not decode: %v: %s", err, r.Value)
			}
			for k, v := range m.Traits {
				got = append(got, k+"="+string(v))
			}
		}
		return got
	}
	msgs := 0
	// message applies a message as the transform does, and returns the realtime sync's calls.
	message := func(raw string) []string {
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
		return calls(b.out)
	}
	// sync runs a sync tick's sync of the partition; dirty tells whether the profile's
	// changelog record is to be written.
	sync := func() (sent []string, dirty bool) {
		t.Helper()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.refreshModel()
		b := &batch{now: now, touched: map[int32]*partition{}}
		out := s.syncPartition(b, 0, part)
		dirty = part.dirty["u1"]
		part.dirty = nil
		return calls(out), dirty
	}
	check := func(step string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: sent %q, want %q", step, got, want)
		}
	}
	figures := func(sid string) (joins, leaves, members int) {
		st := s.stats[sid]
		if st == nil {
			return -1, -1, -1
		}
		return st.joins[0], st.leaves[0], st.members[0]
	}

	check("identify plan=pro, realtime", message(`{"type":"identify","userId":"u1","traits":{"plan":"pro"}}`), nil)
	got, dirty := sync()
	check("first sync", got, []string{"all=true", "pro=true"})
	if !dirty {
		t.Error("first sync: the profile's changelog record is not written")
	}
	if j, l, m := figures("a/pro"); j != 1 || l != 0 || m != 1 {
		t.Errorf("first sync: a/pro joins, leaves, members = %d, %d, %d, want 1, 0, 1", j, l, m)
	}
	got, dirty = sync()
	check("sync with nothing changed", got, nil)
	if dirty {
		t.Error("a sync with nothing changed writes the profile again")
	}

	check("identify plan=free, realtime", message(`{"type":"identify","userId":"u1","traits":{"plan":"free"}}`), []string{"rt=true"})
	got, _ = sync()
	check("sync after plan=free", got, []string{"pro=false"})
	if j, l, m := figures("a/pro"); j != 0 || l != 1 || m != 0 {
		t.Errorf("sync after plan=free: a/pro joins, leaves, members = %d, %d, %d, want 0, 1, 0", j, l, m)
	}

	check("an order, realtime", message(`{"type":"track","userId":"u1","event":"Order Completed"}`), nil)
	got, _ = sync()
	check("sync after an order", got, []string{"orders=1"})
	if j, _, m := figures("t/n"); j != 1 || m != 1 {
		t.Errorf("sync after an order: t/n joins, members = %d, %d, want 1, 1", j, m)
	}

	setConfig(v2)
	got, dirty = sync()
	check("sync after the config change", got, []string{"rt=false", "free_users=true", "all=false"})
	if !dirty {
		t.Error("sync after the config change: the profile's changelog record is not written")
	}
	var ids []string
	for e := range part.profiles["u1"].Synced.all() {
		ids = append(ids, e.id())
	}
	if !slices.Equal(ids, []string{"a/rt"}) {
		t.Errorf("after the config change the profile keeps %q synced, want [a/rt]", ids)
	}
	if j, l, m := figures("a/rt"); j != 1 || l != 0 || m != 1 {
		t.Errorf("sync after the config change: a/rt joins, leaves, members = %d, %d, %d, want 1, 0, 1", j, l, m)
	}
	if j, _, _ := figures("a/all"); j != -1 {
		t.Error("the figures of a removed audience are kept")
	}
	if md := part.meta.Defs; len(md) != 1 || md["a/rt"].Key != "free_users" {
		t.Errorf("partition metadata after the config change: %+v, want a/rt only, key free_users", md)
	}
	got, _ = sync()
	check("sync after the config change, again", got, nil)
}

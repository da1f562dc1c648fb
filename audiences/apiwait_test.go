package audiences

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestProfileAPIAnswersDuringASync: a sync of a large partition releases the state's lock
// now and then, so that the profile API answers in the middle of it, not after it.
func TestProfileAPIAnswersDuringASync(t *testing.T) {
	cfg, err := schemas.ParseConfig([]byte("sources: [{id: web, writeKey: wk1}, {id: engage, writeKey: wk2}]\n"+benchConfig), schemas.ConfigFormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Addr, c.MaxChangesPerTransaction, c.Token = "127.0.0.1:0", 1<<30, "audiences-test-token-0123456789"
	s, err := New(c, Deps{
		Deps: platform.Deps{
			Kafka:  platform.KafkaSettings{Brokers: []string{"127.0.0.1:1"}, ReplicationFactor: -1, Partitions: 1},
			Logger: zerolog.Nop(),
		}, Config: func() Snapshot { return staticSnapshot{cfg} },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.producer.Close()
	defer s.lag.Close()
	s.refreshModel()
	const n = 60_000
	part := &partition{restored: true, profiles: make(map[string]*profile, n), meta: partMeta{Defs: map[string]metaDef{}}}
	for i := range n {
		id := "u" + strconv.Itoa(i)
		p := &profile{ID: id, ids: userIsID, FirstSeen: 1, LastSeen: 1}
		p.mergeTraits([]byte(`{"plan":"pro","email":"x@example.com"}`), s.intern)
		part.profiles[id] = p
	}
	s.nparts, s.parts[0] = 1, part

	done, locked := make(chan time.Duration), make(chan struct{})
	go func() {
		start := time.Now()
		s.mu.Lock()
		close(locked)
		s.syncPartition(&batch{now: time.Now().UnixMilli(), touched: map[int32]*partition{}}, 0, part)
		s.mu.Unlock()
		done <- time.Since(start)
	}()
	<-locked // the sync has the lock
	start := time.Now()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/v1/profiles/u7", nil)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	s.Handler().ServeHTTP(rec, req)
	answered := time.Since(start)
	took := <-done
	if rec.Code != http.StatusOK {
		t.Fatalf("profile during the sync: %d %s", rec.Code, rec.Body)
	}
	if answered >= took/2 {
		t.Errorf("the API answered after %v of a %v sync: it waited for the sync", answered, took)
	}
	t.Logf("answered after %v of a %v sync", answered, took)
}

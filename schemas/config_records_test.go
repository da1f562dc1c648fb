package schemas

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestConfigRecords(t *testing.T) {
	cfg, err := LoadConfigFile("testdata/config/good_full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	records, err := cfg.Records()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range records {
		keys = append(keys, r.Key)
	}
	wantKeys := []string{"source/web", "source/engage", "destination/order-hooks", "destination/paused", "audience/power-users", "audience/top-buyers"}
	if !reflect.DeepEqual(keys, wantKeys) {
		t.Fatalf("record keys = %v, want %v", keys, wantKeys)
	}

	// The plaintext write key never reaches a record: the hash replaces it.
	wantWeb := `{"id":"web","name":"Web site","writeKeyHash":"` + HashWriteKey("wk_live_123") + `","trackingPlan":{"blockedEvents":["Debug Event"]}}`
	if got := string(records[0].Value); got != wantWeb {
		t.Errorf("source/web value = %s, want %s", got, wantWeb)
	}
	for _, r := range records {
		if strings.Contains(string(r.Value), "wk_live_123") {
			t.Errorf("record %s holds the plaintext write key: %s", r.Key, r.Value)
		}
	}
	if cfg.Sources[0].WriteKey != "wk_live_123" {
		t.Error("Records changed the config's source")
	}

	// Every record decodes back to its object (with the key hashed for sources).
	for i, r := range records {
		obj, err := DecodeConfigRecord(r.Key, r.Value)
		if err != nil {
			t.Fatalf("DecodeConfigRecord(%s): %v", r.Key, err)
		}
		if obj.Key() != r.Key || obj.Deleted() {
			t.Errorf("decoded %s as key %s, deleted %v", r.Key, obj.Key(), obj.Deleted())
		}
		var got, want any
		switch {
		case i < 2:
			s := cfg.Sources[i]
			s.WriteKeyHash, s.WriteKey = s.KeyHash(), ""
			got, want = obj.Source, &s
		case i < 4:
			got, want = obj.Destination, &cfg.Destinations[i-2]
		default:
			got, want = obj.Audience, &cfg.Audiences[i-4]
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s decoded as %+v, want %+v", r.Key, got, want)
		}
	}
}

func TestConfigRecordsInvalid(t *testing.T) {
	cfg := &Config{Sources: []Source{{ID: "web"}}}
	if _, err := cfg.Records(); err == nil || err.Error() != "sources[0]: one of writeKey or writeKeyHash is required" {
		t.Errorf("Records() error = %v", err)
	}
	if _, err := (&Destination{ID: "d"}).Record(); err == nil || !strings.HasPrefix(err.Error(), `destination "d": type: must be "webhooks"`) {
		t.Errorf("Destination.Record() error = %v", err)
	}
}

func TestDecodeConfigRecord(t *testing.T) {
	okDest := `{"id":"hooks","type":"webhooks","sources":["web"],"settings":{"webhooks":[{"url":"https://x.example/"}]}}`
	tests := []struct {
		name    string
		key     string
		value   string
		nilVal  bool
		want    ConfigObject
		wantErr string
	}{
		{name: "tombstone", key: "destination/hooks", nilVal: true,
			want: ConfigObject{Kind: ConfigKindDestination, ID: "hooks"}},
		{name: "source", key: "source/web", value: `{"id":"web","writeKeyHash":"` + HashWriteKey("k") + `"}`,
			want: ConfigObject{Kind: ConfigKindSource, ID: "web", Source: &Source{ID: "web", WriteKeyHash: HashWriteKey("k")}}},
		{name: "audience", key: "audience/a", value: `{"id":"a","name":"A","source":"web","rule":{"all":[{"event":"E","within":"1h"}]}}`,
			want: ConfigObject{Kind: ConfigKindAudience, ID: "a", Audience: &Audience{ID: "a", Name: "A", Source: "web",
				Rule: Rule{All: []Condition{{Event: "E", Within: Duration(3600e9)}}}}}},
		{name: "unknown kind", key: "sink/x", value: "{}",
			wantErr: `config record key "sink/x": want source/<id>, destination/<id>, audience/<id>, computed-trait/<id>, tracking-plan/<id>, console-user/<email>, api-token/<id> or identity/rules`},
		{name: "no slash", key: "source", value: "{}",
			wantErr: `config record key "source": want source/<id>, destination/<id>, audience/<id>, computed-trait/<id>, tracking-plan/<id>, console-user/<email>, api-token/<id> or identity/rules`},
		{name: "bad id", key: "source/Web", value: "{}",
			wantErr: `config record key "source/Web": the id must be non-empty and contain only a-z, 0-9, '-' and '_'`},
		{name: "plaintext write key", key: "source/web", value: `{"id":"web","writeKey":"k"}`,
			wantErr: "config record source/web: a source record must carry writeKeyHash, never the plaintext writeKey"},
		{name: "id mismatch", key: "destination/other", value: okDest,
			wantErr: `config record destination/other: the value has id "hooks"`},
		{name: "unknown field", key: "destination/hooks", value: `{"id":"hooks","colour":"red"}`,
			wantErr: `config record destination/hooks: line 1: unknown field "colour"`},
		{name: "invalid object", key: "destination/hooks", value: `{"id":"hooks","type":"webhooks","settings":{"webhooks":[]}}`,
			wantErr: "config record destination/hooks: line 1: settings.webhooks: at least 1 webhook is required"},
		{name: "not JSON", key: "audience/a", value: `id: a`,
			wantErr: "config record audience/a: line 1: invalid JSON: invalid character 'i' looking for beginning of value"},
		{name: "explicit atLeast 0", key: "audience/a", value: `{"id":"a","name":"A","source":"web","rule":{"all":[{"event":"E","atLeast":0}]}}`,
			wantErr: "config record audience/a: line 1: rule.all[0].atLeast: must be at least 1, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var value []byte
			if !tt.nilVal {
				value = []byte(tt.value)
			}
			got, err := DecodeConfigRecord(tt.key, value)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if got.Deleted() != tt.nilVal {
				t.Errorf("Deleted() = %v, want %v", got.Deleted(), tt.nilVal)
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		d    Duration
		json string
	}{
		{Duration(720 * 3600e9), `"720h"`},
		{Duration(90e9), `"1m30s"`},
		{0, `"0s"`},
	}
	for _, tt := range tests {
		t.Run(tt.json, func(t *testing.T) {
			b, err := json.Marshal(tt.d)
			if err != nil || string(b) != tt.json {
				t.Fatalf("Marshal = %s, %v; want %s", b, err, tt.json)
			}
			var back Duration
			if err := json.Unmarshal(b, &back); err != nil || back != tt.d {
				t.Errorf("Unmarshal = %v, %v; want %v", back, err, tt.d)
			}
		})
	}
	var d Duration
	if err := json.Unmarshal([]byte(`"3 days"`), &d); err == nil || err.Error() != `invalid duration "3 days": use a number with a unit such as "720h"` {
		t.Errorf("Unmarshal(3 days) error = %v", err)
	}
}

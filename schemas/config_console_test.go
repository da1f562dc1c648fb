package schemas

import (
	"testing"
)

// TestConsoleUsersRecords: the console's user list becomes one console-user record per
// person, keyed by the email in lower case, and decodes back with its role and PII grant.
func TestConsoleUsersRecords(t *testing.T) {
	cfg, err := LoadConfigFile("testdata/config/good_console_users.yaml")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := cfg.Records()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ConfigObject{}
	for _, r := range recs {
		o, err := DecodeConfigRecord(r.Key, r.Value)
		if err != nil {
			t.Fatalf("decoding %s: %v", r.Key, err)
		}
		got[r.Key] = o
	}
	ana, ok := got["console-user/ana@example.com"]
	if !ok || ana.ConsoleUser == nil || ana.ConsoleUser.Role != "admin" || !ana.ConsoleUser.PII || ana.ConsoleUser.Email != "ana@example.com" {
		t.Fatalf("ana = %+v (records %v)", ana.ConsoleUser, got)
	}
	if bob := got["console-user/bob@example.com"]; bob.ConsoleUser == nil || bob.ConsoleUser.Role != "viewer" || bob.ConsoleUser.PII {
		t.Fatalf("bob = %+v", bob.ConsoleUser)
	}
	if _, err := DecodeConfigRecord("console-user/Ana@Example.com", nil); err == nil {
		t.Error("a console-user key with upper case decoded")
	}
	if o, err := DecodeConfigRecord("console-user/ana@example.com", nil); err != nil || !o.Deleted() {
		t.Errorf("tombstone = %+v, %v", o, err)
	}
}

// TestAPITokenRecord: a token's record round-trips and is refused without a proper hash.
func TestAPITokenRecord(t *testing.T) {
	tok := APIToken{ID: "t1", Name: "ci", Role: "editor", SecretHash: HashAPITokenSecret("trb_x"), Origin: OriginConsole}
	r, err := tok.Record()
	if err != nil {
		t.Fatal(err)
	}
	o, err := DecodeConfigRecord(r.Key, r.Value)
	if err != nil || o.APIToken == nil || *o.APIToken != tok {
		t.Fatalf("decoded %+v, %v", o.APIToken, err)
	}
	tok.SecretHash = "trb_x"
	if _, err := tok.Record(); err == nil {
		t.Error("a token without a hash made a record")
	}
}

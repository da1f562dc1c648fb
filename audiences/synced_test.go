package audiences

import (
	"slices"
	"testing"
)

// TestSyncedListPacked: what a sync sent is kept in 32-bit words, one for an audience's entry
// and three for a computed trait's (docs/audiences.md#memory); entries are found, changed in
// place, removed and added last, in the order they were added.
func TestSyncedListPacked(t *testing.T) {
	var p profile
	p.setSynced("a/vip", "v1", 0, true)
	p.setSynced("t/spend", "v2", 0xfedcba9876543210, true)
	p.setSynced("a/new", "v3", 0, true)
	if len(p.Synced) != 1+3+1 {
		t.Errorf("3 entries (2 audiences, 1 computed trait) take %d words, want 5", len(p.Synced))
	}
	entries := func() (out []string) {
		for e := range p.Synced.all() {
			out = append(out, e.id()+"@"+e.version()+"#"+string(e.H.appendJSON(nil)))
		}
		return out
	}
	if got, want := entries(), []string{`a/vip@v1#"0"`, `t/spend@v2#"fedcba9876543210"`, `a/new@v3#"0"`}; !slices.Equal(got, want) {
		t.Errorf("entries %q, want %q", got, want)
	}
	before := &p.Synced[0]
	p.setSynced("t/spend", "v2", 7, true)
	if &p.Synced[0] != before {
		t.Error("a changed value of the same length made a new list")
	}
	if e, ok := p.synced("t/spend"); !ok || e.H != 7 || e.version() != "v2" {
		t.Errorf("t/spend: %+v %v, want hash 7 of v2", e, ok)
	}
	p.setSynced("a/vip", "", 0, false)
	p.setSynced("t/spend", "v4", 0, true) // a hash of 0 takes no words
	if got, want := entries(), []string{`t/spend@v4#"0"`, `a/new@v3#"0"`}; !slices.Equal(got, want) || len(p.Synced) != 2 {
		t.Errorf("entries %q in %d words, want %q in 2", got, len(p.Synced), want)
	}
	if _, ok := p.synced("a/vip"); ok {
		t.Error("a/vip is still synced after its removal")
	}
	p.setSynced("t/spend", "", 0, false)
	p.setSynced("a/new", "", 0, false)
	if p.Synced != nil {
		t.Errorf("no entries left, the list is %v", p.Synced)
	}
}

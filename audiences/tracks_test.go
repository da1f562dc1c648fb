package audiences

import (
	"slices"
	"testing"
)

func trackIDs(p *profile) []string {
	var out []string
	for _, t := range p.tracks() {
		out = append(out, t.MessageID)
	}
	return out
}

// TestProfileEventsBound: a profile keeps at most AUDIENCES_PROFILE_EVENTS events, the newest,
// in the order of their time (a late one in its place, one older than every kept one when full
// not at all), none older than the lookback; a merged profile's events join in order, each
// message once, bounded as well.
func TestProfileEventsBound(t *testing.T) {
	p := &profile{ID: "u1"}
	for i, at := range []int64{100, 110, 105, 120} { // 105 arrives late
		p.addTrack(tracked{At: at, Event: "E", MessageID: string(rune('a' + i))}, 3, 0)
	}
	if got := trackIDs(p); !slices.Equal(got, []string{"c", "b", "d"}) { // 105, 110, 120
		t.Fatalf("by count: %v", got)
	}
	p.addTrack(tracked{At: 90, Event: "E", MessageID: "old"}, 3, 0)
	if got := trackIDs(p); !slices.Equal(got, []string{"c", "b", "d"}) {
		t.Fatalf("older than every kept one: %v", got)
	}
	p.addTrack(tracked{At: 130, Event: "E", MessageID: "e"}, 3, 111) // 105 and 110 too old
	if got := trackIDs(p); !slices.Equal(got, []string{"d", "e"}) {
		t.Fatalf("by age: %v", got)
	}
	p.addTrack(tracked{At: 140, Event: "E", MessageID: "f"}, 1, 0) // the setting lowered
	if got := trackIDs(p); !slices.Equal(got, []string{"f"}) {
		t.Fatalf("setting lowered: %v", got)
	}
	p.pruneTracks(1000)
	if p.tracks() != nil || p.rare != nil {
		t.Fatalf("all too old: %v", p.tracks())
	}

	u := &profile{ID: "u1", rare: &profileRare{Tracks: []tracked{{At: 10, MessageID: "x"}, {At: 30, MessageID: "y"}}}}
	a := &profile{ID: "a1", rare: &profileRare{Tracks: []tracked{{At: 20, MessageID: "z"}, {At: 30, MessageID: "y"}, {At: 40, MessageID: "w"}}}}
	u.absorb(a, 50)
	if got := trackIDs(u); !slices.Equal(got, []string{"z", "y", "w"}) { // 3 newest of x z y w
		t.Fatalf("absorbed: %v", got)
	}
}

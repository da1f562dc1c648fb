package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// fmtBatch is the original fmt-based generator that appendBatch replaced, kept as the
// reference: the load must not change with the optimisation.
func fmtBatch(rng *rand.Rand, n int, now string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"batch":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		user := "user_" + strconv.Itoa(rng.IntN(1_000_000))
		msgID := fmt.Sprintf("lg-%016x", rng.Uint64())
		switch r := rng.IntN(10); {
		case r < 7:
			fmt.Fprintf(&b, `{"type":"track","messageId":%q,"userId":%q,"anonymousId":"5f0a4b2c-9d1e-4c3b-8a7f-1e2d3c4b5a69","event":%q,"properties":{"orderId":"ord_%d","total":%d.%02d,"currency":"USD","coupon":"WINTER","items":%d},"context":{"library":{"name":"analytics.js","version":"next-1.64.0"},"page":{"path":"/checkout","url":"https://shop.example.com/checkout"},"locale":"en-US"},"timestamp":%q}`,
				msgID, user, events[rng.IntN(len(events))], rng.IntN(99999), rng.IntN(500), rng.IntN(100), 1+rng.IntN(9), now)
		case r < 9:
			fmt.Fprintf(&b, `{"type":"identify","messageId":%q,"userId":%q,"traits":{"email":"%s@example.com","name":"Peter Gibbons","plan":"pro","logins":%d,"company":"Initech"},"context":{"library":{"name":"analytics-go","version":"3.1.0"},"locale":"en-US"},"timestamp":%q}`,
				msgID, user, user, rng.IntN(500), now)
		default:
			fmt.Fprintf(&b, `{"type":"page","messageId":%q,"userId":%q,"name":"Pricing","properties":{"path":"/pricing","referrer":"https://www.example.org/","title":"Pricing","url":"https://shop.example.com/pricing"},"context":{"library":{"name":"analytics.js","version":"next-1.64.0"}},"timestamp":%q}`,
				msgID, user, now)
		}
	}
	b.WriteString(`],"sentAt":"` + now + `"}`)
	return b.Bytes()
}

func TestMakeBatchMatchesFmt(t *testing.T) {
	const now = "2026-11-23T11:00:00.000Z"
	for seed := uint64(0); seed < 20; seed++ {
		want := fmtBatch(rand.New(rand.NewPCG(seed, seed*7+1)), 100, now)
		got := appendBatch(nil, rand.New(rand.NewPCG(seed, seed*7+1)), 100, now)
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d: bodies differ\n got %s\nwant %s", seed, got, want)
		}
		if !json.Valid(got) {
			t.Fatalf("seed %d: invalid JSON", seed)
		}
	}
}

func BenchmarkMakeBatch(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for b.Loop() {
		_ = makeBatch(rng, 100)
	}
}

func BenchmarkFmtBatch(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for b.Loop() {
		_ = fmtBatch(rng, 100, "2026-11-23T11:00:00.000Z")
	}
}

package analytics_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	segment "gopkg.in/segmentio/analytics-go.v3"

	"github.com/tributary-cdp/tributary/analytics"
)

// discardServer answers every batch with 200 after reading it.
func discardServer(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"success":true}`)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkTrack measures the whole cost of one Track call, side by side with Segment's
// analytics-go v3: b.N calls, then Close, which waits until every message was sent to a
// local server that discards them. Time and allocations thus include the background encoding
// and sending, not only the call. Both clients block when their queue is full (ours with
// BlockWhenFull; v3 always), so a call cannot look cheap by being refused.
//
//	go test -run '^$' -bench BenchmarkTrack -benchmem -count 5 ./analytics
func BenchmarkTrack(b *testing.B) {
	srv := discardServer(b)
	for _, batch := range []int{20, 250} { // our default (docs/client.md), v3's default
		name := fmt.Sprintf("batch=%d", batch)
		b.Run(name+"/tributary", func(b *testing.B) {
			c := analytics.New("wk_bench")
			c.Endpoint = srv.URL
			c.FlushAt = batch
			c.BlockWhenFull = true
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				err := c.Track(&analytics.Track{
					UserId:     "user-42",
					Event:      "Order Completed",
					Properties: map[string]any{"revenue": 39.95, "currency": "EUR"},
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			if err := c.Close(); err != nil {
				b.Fatal(err)
			}
		})
		if batch == 250 {
			// Batches of 250 (~65 KB) are gzipped by default (CompressAbove, 32 KiB); v3 never
			// compresses. The same without compression:
			b.Run(name+"/tributary-nogzip", func(b *testing.B) {
				c := analytics.New("wk_bench")
				c.Endpoint = srv.URL
				c.FlushAt = batch
				c.BlockWhenFull = true
				c.CompressAbove = -1
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if err := c.Track(&analytics.Track{
						UserId:     "user-42",
						Event:      "Order Completed",
						Properties: map[string]any{"revenue": 39.95, "currency": "EUR"},
					}); err != nil {
						b.Fatal(err)
					}
				}
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
			})
		}
		b.Run(name+"/segmentio-v3", func(b *testing.B) {
			c, err := segment.NewWithConfig("wk_bench", segment.Config{Endpoint: srv.URL, BatchSize: batch})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				err := c.Enqueue(segment.Track{
					UserId:     "user-42",
					Event:      "Order Completed",
					Properties: segment.Properties{"revenue": 39.95, "currency": "EUR"},
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			if err := c.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

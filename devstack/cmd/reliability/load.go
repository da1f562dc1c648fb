package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// writeKey is the harness source's write key.
const writeKey = "wk_reliability"

// loadGen sends track events to ingest's /v1/batch as Segment's libraries do: batches of
// batchSize events with unique message ids, at rate events/s, from up to workers requests in
// flight; a batch that fails (no answer, 5xx, 429) is sent again with the same ids after a
// back-off, for up to giveUp, so a fault makes duplicates the pipeline must drop. An event is
// acknowledged when a request that carried it got 200.
type loadGen struct {
	url, prefix string
	rate        int
	batchSize   int
	workers     int
	giveUp      time.Duration
	client      *http.Client

	mu       sync.Mutex
	acked    map[string]struct{}
	sent     int
	requests int
	retries  int
	gaveUp   int // events never acknowledged
	statuses map[string]int
}

func newLoad(ingestURL, prefix string, rate int) *loadGen {
	return &loadGen{
		url: ingestURL + "/v1/batch", prefix: prefix, rate: rate, batchSize: 10, workers: 64,
		giveUp: 3 * time.Minute, client: &http.Client{Timeout: 10 * time.Second},
		acked: map[string]struct{}{}, statuses: map[string]int{},
	}
}

type batch struct {
	ids  []string
	body []byte
}

// run sends until ctx is done, then waits for the batches in flight to be acknowledged or
// given up.
func (l *loadGen) run(ctx context.Context) {
	batches := make(chan batch)
	var wg sync.WaitGroup
	for range l.workers {
		wg.Go(func() {
			for b := range batches {
				l.send(b)
			}
		})
	}
	interval := time.Duration(float64(time.Second) * float64(l.batchSize) / float64(l.rate))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	seq := 0
	next := time.Now()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
		}
		// Catch up on the ticks a busy moment missed, but never send more than a second's worth.
		for next.Before(time.Now()) && ctx.Err() == nil {
			b := l.build(seq)
			seq++
			next = next.Add(interval)
			if time.Since(next) > time.Second {
				next = time.Now()
			}
			select {
			case batches <- b:
			case <-ctx.Done():
				break loop
			}
		}
	}
	close(batches)
	wg.Wait()
}

func (l *loadGen) build(seq int) batch {
	var buf bytes.Buffer
	b := batch{ids: make([]string, l.batchSize)}
	now := time.Now().UnixNano()
	buf.WriteString(`{"batch":[`)
	for i := range l.batchSize {
		n := seq*l.batchSize + i
		id := l.prefix + "-" + strconv.Itoa(n)
		b.ids[i] = id
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"type":"track","event":"Order Completed","userId":"user-%d","messageId":%q,"properties":{"sentAtNs":%d,"total":12.5}}`, n%1000, id, now)
	}
	buf.WriteString(`]}`)
	b.body = buf.Bytes()
	return b
}

// send posts b until it is acknowledged, refused for good (a 4xx other than 408/429), or
// giveUp passed.
func (l *loadGen) send(b batch) {
	l.mu.Lock()
	l.sent += len(b.ids)
	l.mu.Unlock()
	start := time.Now()
	wait := 200 * time.Millisecond
	for attempt := 0; ; attempt++ {
		status := l.post(b.body)
		l.mu.Lock()
		l.requests++
		if attempt > 0 {
			l.retries++
		}
		l.statuses[status]++
		if status == "200" {
			for _, id := range b.ids {
				l.acked[id] = struct{}{}
			}
		}
		l.mu.Unlock()
		retry := status != "200" && (status[0] != '4' || status == "408" || status == "429")
		if !retry || time.Since(start) > l.giveUp {
			if status != "200" {
				l.mu.Lock()
				l.gaveUp += len(b.ids)
				l.mu.Unlock()
			}
			return
		}
		time.Sleep(wait)
		wait = min(2*wait, 5*time.Second)
	}
}

// post sends one request; its result is the status code, or "error" (no answer).
func (l *loadGen) post(body []byte) string { return postJSON(l.client, l.url, writeKey, body, false) }

// postJSON posts body with key as the Basic user name (gzip: the body is gzipped) and
// returns the status code, or "error" when no answer came.
func postJSON(client *http.Client, url, key string, body []byte, gz bool) string {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "error"
	}
	req.SetBasicAuth(key, "")
	req.Header.Set("Content-Type", "application/json")
	if gz {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := client.Do(req)
	if err != nil {
		return "error"
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return strconv.Itoa(resp.StatusCode)
}

// ackedIDs returns the acknowledged message ids.
func (l *loadGen) ackedIDs() map[string]struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]struct{}, len(l.acked))
	for id := range l.acked {
		out[id] = struct{}{}
	}
	return out
}

// markAcked adds an event acknowledged outside the load's own requests.
func (l *loadGen) markAcked(id string) {
	l.mu.Lock()
	l.acked[id] = struct{}{}
	l.mu.Unlock()
}

package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// attacker sends hostile input to ingest while the load runs: each kind of request from its
// own loop, and slow-body connections held open. Every kind but utf8 must be refused with a
// 4xx; utf8 (invalid UTF-8 in a valid event) must be accepted and delivered as valid JSON.
type attacker struct {
	url    string
	client *http.Client
	load   *loadGen // utf8 events count as acknowledged events of the load

	mu      sync.Mutex
	results map[string]map[string]int // kind → status → count
	slow    slowStats
}

type slowStats struct {
	opened, refusedAtOnce, cut int
	cutAfter                   []time.Duration
}

func newAttacker(ingestURL string, load *loadGen) *attacker {
	return &attacker{url: ingestURL, load: load, client: &http.Client{Timeout: 30 * time.Second},
		results: map[string]map[string]int{}}
}

func (a *attacker) record(kind, status string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.results[kind] == nil {
		a.results[kind] = map[string]int{}
	}
	a.results[kind][status]++
}

// run attacks until ctx is done.
func (a *attacker) run(ctx context.Context, slowConns int) {
	bomb := gzipOfZeros(64 << 20)
	oversize := []byte(`{"type":"track","event":"E","userId":"u","properties":{"x":"` + strings.Repeat("a", 600<<10) + `"}}`)
	kinds := map[string]func(n int) (path, key string, body []byte, gz bool){
		"malformed": func(int) (string, string, []byte, bool) {
			return "/v1/track", writeKey, []byte(`{"type":"track",`), false
		},
		"random": func(int) (string, string, []byte, bool) {
			b := make([]byte, 1024)
			_, _ = rand.Read(b)
			return "/v1/track", writeKey, b, false
		},
		"gzip_bomb": func(int) (string, string, []byte, bool) { return "/v1/track", writeKey, bomb, true },
		"oversize":  func(int) (string, string, []byte, bool) { return "/v1/track", writeKey, oversize, false },
		"wrong_key": func(int) (string, string, []byte, bool) {
			return "/v1/track", "wk_guess_" + strconv.Itoa(time.Now().Nanosecond()), []byte(`{"type":"track","event":"E","userId":"u"}`), false
		},
		"invalid_utf8": func(n int) (string, string, []byte, bool) {
			id := a.load.prefix + "-utf8-" + strconv.Itoa(n)
			return "/v1/track", writeKey, fmt.Appendf(nil, "{\"type\":\"track\",\"event\":\"E\xff\",\"userId\":\"u-\xfe%d\",\"messageId\":%q,\"properties\":{\"sentAtNs\":%d,\"k\xc3\":\"v\xed\xa0\x80\"}}", n, id, time.Now().UnixNano()), false
		},
	}
	var wg sync.WaitGroup
	for kind, build := range kinds {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				path, key, body, gz := build(n)
				status := a.post(path, key, body, gz)
				a.record(kind, status)
				if kind == "invalid_utf8" && status == "200" {
					a.load.markAcked(a.load.prefix + "-utf8-" + strconv.Itoa(n))
				}
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		})
	}
	for i := range slowConns {
		wg.Go(func() { a.slowBodies(ctx, i%2 == 0) })
	}
	wg.Wait()
}

func (a *attacker) post(path, key string, body []byte, gz bool) string {
	return postJSON(a.client, a.url+path, key, body, gz)
}

// slowBodies keeps one connection sending a 20 KB body at a byte a second, with the valid
// write key or a guessed one, and opens another when ingest ends it.
func (a *attacker) slowBodies(ctx context.Context, validKey bool) {
	key := "wk_guess"
	if validKey {
		key = writeKey
	}
	host := strings.TrimPrefix(a.url, "http://")
	auth := base64.StdEncoding.EncodeToString([]byte(key + ":"))
	for ctx.Err() == nil {
		c, err := net.DialTimeout("tcp", host, 5*time.Second)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		start := time.Now()
		a.mu.Lock()
		a.slow.opened++
		a.mu.Unlock()
		fmt.Fprintf(c, "POST /v1/track HTTP/1.1\r\nHost: %s\r\nAuthorization: Basic %s\r\nContent-Type: application/json\r\nContent-Length: 20000\r\n\r\n{", host, auth)
		ended := make(chan struct{})
		go func() { // ingest's answer or close ends the connection
			_, _ = io.Copy(io.Discard, c)
			close(ended)
		}()
		cut := false
	trickle:
		for {
			select {
			case <-ctx.Done():
				break trickle
			case <-ended:
				cut = true
				break trickle
			case <-time.After(time.Second):
				if _, err := c.Write([]byte(" ")); err != nil {
					cut = true
					break trickle
				}
			}
		}
		c.Close()
		if cut {
			took := time.Since(start)
			a.mu.Lock()
			if took < time.Second {
				a.slow.refusedAtOnce++
			} else {
				a.slow.cut++
				a.slow.cutAfter = append(a.slow.cutAfter, took)
			}
			a.mu.Unlock()
			sleep(ctx, time.Second) // an attacker holds connections open; it does not flood
		}
	}
}

// summary says, per kind, what ingest answered, and whether every hostile kind was refused.
func (a *attacker) summary() (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var parts []string
	ok := true
	kinds := make([]string, 0, len(a.results))
	for k := range a.results {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		var st []string
		for s, n := range a.results[k] {
			st = append(st, fmt.Sprintf("%s×%d", s, n))
			want4xx := k != "invalid_utf8"
			if want4xx && (len(s) != 3 || s[0] != '4') {
				ok = false
			}
			if !want4xx && s != "200" {
				ok = false
			}
		}
		sort.Strings(st)
		parts = append(parts, k+" "+strings.Join(st, ","))
	}
	maxCut := time.Duration(0)
	for _, d := range a.slow.cutAfter {
		maxCut = max(maxCut, d)
	}
	parts = append(parts, fmt.Sprintf("slow bodies: %d connections, %d refused at once (wrong key), %d cut (longest %s)",
		a.slow.opened, a.slow.refusedAtOnce, a.slow.cut, maxCut.Round(100*time.Millisecond)))
	return strings.Join(parts, "; "), ok
}

func gzipOfZeros(n int) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for i := 0; i < n; i += len(zeros) {
		_, _ = zw.Write(zeros)
	}
	_ = zw.Close()
	return buf.Bytes()
}

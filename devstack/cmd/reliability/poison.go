package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// poisonIDs are messageIds no HTTP header may carry, or that HTTP would change: a control
// character, a header injection, a trailing space (docs/security.md#what-cannot-become-a-header).
// Each gets a number, so that the router's de-duplication keeps them all.
func poisonID(kind string, n int) string {
	switch n % 3 {
	case 0:
		return kind + strconv.Itoa(n) + "\a"
	case 1:
		return kind + strconv.Itoa(n) + "\r\nX-Injected: 1"
	}
	return kind + strconv.Itoa(n) + " "
}

// poisoner sends messages with poison messageIds through every door, beside the load: single
// calls (each must be refused 400), batches of one legitimate event and one poison (200 with
// the poison alone rejected; the legitimate one counts as an acknowledged event of the load),
// records on tracking.inbound (ingest must write each to tracking.rejected), and records
// produced straight to tracking.events, as a producer with Kafka access could (ingest never
// sees them: the router routes them, and the deliverer must dead-letter them as
// invalid_request without counting them toward the endpoint host's breaker, which would hold
// back the legitimate deliveries to that host).
type poisoner struct {
	ingestURL string
	client    *http.Client
	kafka     *kgo.Client
	load      *loadGen

	mu                       sync.Mutex
	single, batch            map[string]int // answers: status (batch: "200 rejected" when right)
	inbound, events, errored int            // records produced; produce errors
}

func newPoisoner(ingestURL, broker string, load *loadGen) (*poisoner, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ProduceRequestTimeout(5*time.Second))
	if err != nil {
		return nil, err
	}
	return &poisoner{ingestURL: ingestURL, client: &http.Client{Timeout: 30 * time.Second}, kafka: cl, load: load,
		single: map[string]int{}, batch: map[string]int{}}, nil
}

func (p *poisoner) close() { p.kafka.Close() }

// run sends one message through each door every 50 ms until ctx is done.
func (p *poisoner) run(ctx context.Context) {
	for n := 0; ctx.Err() == nil; n++ {
		p.sendSingle(n)
		p.sendBatch(n)
		p.produce(ctx, n)
		sleep(ctx, 50*time.Millisecond)
	}
}

func event(id, userID string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "track", "event": "Order Completed", "userId": userID, "messageId": id,
		"properties": map[string]any{"sentAtNs": time.Now().UnixNano(), "total": 12.5}})
	return b
}

func (p *poisoner) sendSingle(n int) {
	status := postJSON(p.client, p.ingestURL+"/v1/track", writeKey, event(poisonID("ps", n), "poison-user"), false)
	p.mu.Lock()
	p.single[status]++
	p.mu.Unlock()
}

// sendBatch posts a legitimate event and a poison one; the answer must reject the poison
// (index 1) alone.
func (p *poisoner) sendBatch(n int) {
	legit := p.load.prefix + "-pb-" + strconv.Itoa(n)
	body := fmt.Appendf(nil, `{"batch":[%s,%s]}`, event(legit, "user-pb"), event(poisonID("pb", n), "poison-user"))
	req, _ := http.NewRequest(http.MethodPost, p.ingestURL+"/v1/batch", strings.NewReader(string(body)))
	req.SetBasicAuth(writeKey, "")
	req.Header.Set("Content-Type", "application/json")
	status := "error"
	if resp, err := p.client.Do(req); err == nil {
		var answer struct {
			Rejected []struct {
				Index  int    `json:"index"`
				Reason string `json:"reason"`
			} `json:"rejected"`
		}
		status = strconv.Itoa(resp.StatusCode)
		if json.NewDecoder(resp.Body).Decode(&answer) == nil && resp.StatusCode == http.StatusOK {
			if len(answer.Rejected) == 1 && answer.Rejected[0].Index == 1 && strings.HasPrefix(answer.Rejected[0].Reason, "messageId: must not") {
				status = "200 rejected"
				p.load.markAcked(legit)
			}
		}
		resp.Body.Close()
	}
	p.mu.Lock()
	p.batch[status]++
	p.mu.Unlock()
}

// produce writes one poison record to tracking.inbound (with the write key) and one straight
// to tracking.events (as ingest would write it, with the source-id header).
func (p *poisoner) produce(ctx context.Context, n int) {
	pid := poisonID("pe", n)
	value, _ := json.Marshal(map[string]any{"type": "track", "event": "Order Completed", "userId": "poison-user", "messageId": pid,
		"timestamp": schemas.FormatTimestamp(time.Now()), "receivedAt": schemas.FormatTimestamp(time.Now())})
	// A produce under way when the scenario's context ends still finishes: an error would be
	// the harness's own cancellation, not a poison the stack let through.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	res := p.kafka.ProduceSync(pctx,
		&kgo.Record{Topic: schemas.TopicInbound, Key: []byte("poison-inbound-" + strconv.Itoa(n)), Value: event(poisonID("pi", n), "poison-user"),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderWriteKey, Value: []byte(writeKey)}}},
		&kgo.Record{Topic: schemas.TopicEvents, Key: []byte("poison-user"), Value: value,
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("load")}, {Key: schemas.HeaderMessageID, Value: []byte(pid)},
				{Key: schemas.HeaderType, Value: []byte("track")}}},
	)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range res {
		switch {
		case r.Err != nil:
			p.errored++
		case r.Record.Topic == schemas.TopicInbound:
			p.inbound++
		default:
			p.events++
		}
	}
}

// rejectedInbound counts the tracking.rejected records of the poison sent on tracking.inbound
// whose reason names the messageId, reading until want arrived or timeout.
func (p *poisoner) rejectedInbound(ctx context.Context, broker string, want int, timeout time.Duration) int {
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(schemas.TopicRejected),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return 0
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	got := 0
	for got < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if !strings.HasPrefix(string(r.Key), "poison-inbound-") {
				return
			}
			for _, h := range r.Headers {
				if h.Key == schemas.HeaderReason && strings.HasPrefix(string(h.Value), "messageId: must not") {
					got++
				}
			}
		})
	}
	return got
}

// summary says what each door answered, and whether every poison was refused where it should.
func (p *poisoner) summary() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ok := p.errored == 0 && p.inbound > 0 && p.events > 0
	for status := range p.single {
		ok = ok && status == "400"
	}
	for status := range p.batch {
		ok = ok && status == "200 rejected"
	}
	return fmt.Sprintf("poison messageIds: single calls %s, batches %s, %d on tracking.inbound, %d on tracking.events (%d produce errors)",
		formatCounts(p.single), formatCounts(p.batch), p.inbound, p.events, p.errored), ok
}

// metricSum scrapes a Prometheus text endpoint and sums the samples of name whose labels hold
// every label="value" of match.
func metricSum(client *http.Client, url, name string, match ...string) (float64, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	total := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
next:
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest == "" || (rest[0] != ' ' && rest[0] != '{')) {
			continue
		}
		for _, m := range match {
			if !strings.Contains(rest, m) {
				continue next
			}
		}
		v, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
		if err == nil {
			total += v
		}
	}
	return total, sc.Err()
}

// delivererMetrics are the /metrics URLs of the stack's deliverers.
func (s *stack) delivererMetrics() []string {
	var urls []string
	for _, p := range s.services {
		if strings.HasPrefix(p.name, "deliverer") {
			urls = append(urls, strings.TrimSuffix(p.readyURL, "/readyz")+"/metrics")
		}
	}
	return urls
}

// sumOver sums metricSum over urls.
func sumOver(client *http.Client, urls []string, name string, match ...string) (float64, error) {
	total := 0.0
	for _, u := range urls {
		v, err := metricSum(client, u, name, match...)
		if err != nil {
			return 0, err
		}
		total += v
	}
	return total, nil
}

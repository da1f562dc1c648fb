package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// postmortem finds where the acknowledged events that did not arrive are, on the still-running
// broker, once a scenario lost some (docs/reliability.md#when-a-scenario-fails): in
// tracking.events (visible to read_committed readers, or only above a partition's last stable
// offset), in webhooks.deliveries (committed, or only in open or aborted transactions), in the
// retry tiers or the DLQ, and where the groups' committed offsets are against each partition's
// last stable and end offsets, with every transaction that is not complete. Its report is
// written to postmortem.txt in the scenario's folder; it returns a summary line.
func postmortem(ctx context.Context, st *stack, missing map[string]struct{}, dir string) string {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var b strings.Builder
	summary, err := inspect(ctx, st.broker.addr(), missing, &b)
	serviceMetrics(st, &b)
	dumpGoroutines(st, &b)
	if err != nil {
		summary += fmt.Sprintf(" (post-mortem incomplete: %v)", err)
		fmt.Fprintf(&b, "\nerror: %v\n", err)
	}
	path := filepath.Join(dir, "postmortem.txt")
	if werr := os.WriteFile(path, []byte(b.String()), 0o644); werr == nil {
		summary += "; details in " + path
	}
	return summary
}

// serviceMetrics writes the counters of each router and deliverer that say what became of the
// messages: routed or dropped (a duplicate, no destination, suppressed), delivered, attempted,
// dead-lettered.
func serviceMetrics(st *stack, b *strings.Builder) {
	for _, p := range st.services {
		if p.readyURL == "" || p.name == "ingest" {
			continue
		}
		url := strings.TrimSuffix(p.readyURL, "/readyz") + "/metrics"
		fmt.Fprintf(b, "\n%s (%s):\n", p.name, url)
		resp, err := http.Get(url)
		if err != nil {
			fmt.Fprintf(b, "  %v\n", err)
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			for _, name := range []string{"tributary_router_messages_total", "tributary_router_deliveries_total",
				"tributary_deliverer_attempts_total", "tributary_deliverer_delivered_total", "tributary_deliverer_dlq_total",
				"tributary_consumer_lag_records"} {
				if strings.HasPrefix(line, name) {
					fmt.Fprintf(b, "  %s\n", line)
				}
			}
		}
	}
}

// dumpGoroutines makes every router and deliverer print its goroutines' stacks to its log and
// exit (SIGQUIT, Go's default): where a stuck service waits. The stack is stopped right after.
func dumpGoroutines(st *stack, b *strings.Builder) {
	for _, p := range st.services {
		if p.name == "ingest" {
			continue
		}
		if p.signal(syscall.SIGQUIT) {
			fmt.Fprintf(b, "\n%s: goroutines dumped to %s (SIGQUIT)\n", p.name, p.log)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range st.services {
		for p.name != "ingest" && p.alive() && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// found is where a missing message id was seen.
type found struct {
	topic     string
	partition int32
	offset    int64
}

func inspect(ctx context.Context, brokers string, missing map[string]struct{}, b *strings.Builder) (string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		return "post-mortem: no client", err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	fmt.Fprintf(b, "post-mortem at %s: %d acknowledged events not delivered\n", time.Now().UTC().Format(time.RFC3339), len(missing))

	topics := []string{schemas.TopicEvents, schemas.TopicDeliveries}
	groups := map[string]string{schemas.TopicEvents: "tributary-router", schemas.TopicDeliveries: "tributary-deliverer"}
	var errs []error
	ends, err := adm.ListEndOffsets(ctx, topics...)
	errs = append(errs, err)
	stables, err := adm.ListCommittedOffsets(ctx, topics...)
	errs = append(errs, err)
	var summary []string
	for _, topic := range topics {
		committed, err := adm.FetchOffsetsForTopics(ctx, groups[topic], topic)
		errs = append(errs, err)
		uncommitted, err := readAll(ctx, brokers, topic, kgo.ReadUncommitted(), missing)
		errs = append(errs, err)
		visible, err := readAll(ctx, brokers, topic, kgo.ReadCommitted(), missing)
		errs = append(errs, err)
		fmt.Fprintf(b, "\n%s (group %s):\n", topic, groups[topic])
		var parts []int32
		for p := range ends[topic] {
			parts = append(parts, p)
		}
		slices.Sort(parts)
		for _, p := range parts {
			end, _ := ends.Lookup(topic, p)
			lso, _ := stables.Lookup(topic, p)
			c, _ := committed.Lookup(topic, p)
			var in, inVisible, belowCommit int
			for id, f := range uncommitted {
				if f.partition != p {
					continue
				}
				in++
				if _, ok := visible[id]; ok {
					inVisible++
				}
				if f.offset < c.At {
					belowCommit++
				}
			}
			fmt.Fprintf(b, "  partition %d: end %d, last stable %d, group committed %d; missing ids here %d (read_committed sees %d, below the group's commit %d)\n",
				p, end.Offset, lso.Offset, c.At, in, inVisible, belowCommit)
		}
		onlyUncommitted := 0
		for id := range uncommitted {
			if _, ok := visible[id]; !ok {
				onlyUncommitted++
			}
		}
		summary = append(summary, fmt.Sprintf("%s has %d of them (%d only in open or aborted transactions)", topic, len(uncommitted), onlyUncommitted))
	}

	// The retry tiers and the DLQ: read committed.
	md, err := adm.ListTopics(ctx)
	errs = append(errs, err)
	var tiers []string
	for _, t := range md.Names() {
		if strings.HasPrefix(t, "webhooks.retry.") || t == schemas.TopicDLQ {
			tiers = append(tiers, t)
		}
	}
	sort.Strings(tiers)
	for _, t := range tiers {
		in, err := readAll(ctx, brokers, t, kgo.ReadCommitted(), missing)
		errs = append(errs, err)
		if len(in) > 0 {
			summary = append(summary, fmt.Sprintf("%s has %d", t, len(in)))
			fmt.Fprintf(b, "\n%s: %d of the missing ids\n", t, len(in))
		}
	}

	// Transactions that are not complete, and the producers of partitions held back by one.
	txns, err := adm.ListTransactions(ctx, nil, nil)
	errs = append(errs, err)
	var ids []string
	for _, t := range txns.Sorted() {
		ids = append(ids, t.TxnID)
	}
	open := 0
	if len(ids) > 0 {
		described, err := adm.DescribeTransactions(ctx, ids...)
		errs = append(errs, err)
		fmt.Fprintf(b, "\ntransactions:\n")
		for _, t := range described.Sorted() {
			if t.State != "Empty" && t.State != "CompleteCommit" && t.State != "CompleteAbort" {
				open++
			}
			fmt.Fprintf(b, "  %s: %s, producer %d epoch %d, timeout %dms, started %s, partitions %v\n", t.TxnID, t.State,
				t.ProducerID, t.ProducerEpoch, t.TimeoutMillis, time.UnixMilli(t.StartTimestamp).UTC().Format(time.RFC3339Nano), t.Topics.Sorted())
		}
	}
	held := kadm.TopicsSet{}
	for _, topic := range topics {
		for p, end := range ends[topic] {
			if lso, ok := stables.Lookup(topic, p); ok && lso.Offset < end.Offset {
				held.Add(topic, p)
			}
		}
	}
	if len(held) > 0 {
		producers, err := adm.DescribeProducers(ctx, held)
		errs = append(errs, err)
		fmt.Fprintf(b, "\nproducers of partitions whose last stable offset is below their end:\n")
		producers.EachProducer(func(p kadm.DescribedProducer) {
			fmt.Fprintf(b, "  %s/%d: producer %d epoch %d, open transaction from offset %d, last write %s\n", p.Topic, p.Partition,
				p.ProducerID, p.ProducerEpoch, p.CurrentTxnStartOffset, time.UnixMilli(p.LastTimestamp).UTC().Format(time.RFC3339Nano))
		})
	}
	summary = append(summary, fmt.Sprintf("%d transactions not complete, %d partitions held back by one", open, len(held)))
	return "post-mortem: " + strings.Join(summary, "; "), errors.Join(errs...)
}

// readAll reads topic from its start to its end (read_committed: its last stable offset) and
// returns where each message id of ids is (its first record).
func readAll(ctx context.Context, brokers, topic string, iso kgo.IsolationLevel, ids map[string]struct{}) (map[string]found, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var ends kadm.ListedOffsets
	if iso == kgo.ReadCommitted() {
		ends, err = adm.ListCommittedOffsets(ctx, topic)
	} else {
		ends, err = adm.ListEndOffsets(ctx, topic)
	}
	if err != nil {
		return nil, err
	}
	left := map[int32]int64{}
	for p, o := range ends[topic] {
		if o.Offset > 0 {
			left[p] = o.Offset
		}
	}
	out := map[string]found{}
	// Read until every partition reached its end, or nothing came for 3 s (read_committed
	// skips aborted records, which may be a partition's last ones).
	for len(left) > 0 {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return out, fmt.Errorf("reading %s: %d partitions not read to their end", topic, len(left))
		}
		if fs.NumRecords() == 0 && pctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == schemas.HeaderMessageID {
					if _, ok := ids[string(h.Value)]; ok {
						if _, seen := out[string(h.Value)]; !seen {
							out[string(h.Value)] = found{r.Topic, r.Partition, r.Offset}
						}
					}
				}
			}
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	return out, nil
}

package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Pending retries (docs/console.md#pending-retries): the messages of a destination waiting in
// the retry tiers (views.Pending, read by pending_reader.go), and retry now: each is copied to
// webhooks.deliveries with the header retry-now, and the deliverer sends it once, at once
// (docs/delivery.md#retry-now).

// pendingView is the API's form of a waiting message.
type pendingView struct {
	MessageID string `json:"messageId"`
	Type      string `json:"type,omitempty"`
	// Attempt is the number of the attempt its tier will make.
	Attempt int `json:"attempt"`
	// Tier is the retry tier topic it waits in.
	Tier string `json:"tier"`
	// NextAttemptAt is when its tier attempts it (the tier record's due-at); past while it waits
	// for its endpoint (parked) or is being attempted.
	NextAttemptAt  string `json:"nextAttemptAt"`
	FirstAttemptAt string `json:"firstAttemptAt,omitempty"`
	LastError      string `json:"lastError,omitempty"`
	LastStatus     int    `json:"lastStatus"`
	Deferrals      int    `json:"deferrals,omitempty"`
	URL            string `json:"url,omitempty"`
	// RetryNow is the state of its retry-now: requested, sending, failed or skipped (absent:
	// none). A message a retry-now delivered is not listed.
	RetryNow   string `json:"retryNow,omitempty"`
	RetryNowAt string `json:"retryNowAt,omitempty"`
}

func pendingViewOf(p *views.PendingRecord) pendingView {
	v := pendingView{MessageID: p.MessageID, Type: p.Type, Attempt: p.Attempt, Tier: p.Topic, LastError: p.LastError,
		LastStatus: p.LastStatus, Deferrals: p.Deferrals, URL: p.URL, RetryNow: p.RetryNow}
	switch {
	case !p.DueAt.IsZero():
		v.NextAttemptAt = schemas.FormatTimestamp(p.DueAt)
	default: // a tier record without due-at (not the deliverer's): due when written
		v.NextAttemptAt = schemas.FormatTimestamp(p.WrittenAt)
	}
	if !p.FirstAttemptAt.IsZero() {
		v.FirstAttemptAt = schemas.FormatTimestamp(p.FirstAttemptAt)
	}
	if !p.RetryNowAt.IsZero() {
		v.RetryNowAt = schemas.FormatTimestamp(p.RetryNowAt)
	}
	return v
}

// listPending answers the destination's waiting messages, soonest next attempt first;
// ?cursor= and ?limit= (100) page.
func (s *Service) listPending(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, ok := s.deps.Store.Snapshot().DestinationByID(id); !ok {
		return errNotFound("no destination %q", id)
	}
	limit, err := pageLimit(r, 100)
	if err != nil {
		return err
	}
	start := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		if start, err = strconv.Atoi(c); err != nil || start < 0 {
			return errInvalid("cursor", "cursor: not a cursor of this API: %q", c)
		}
	}
	recs, dropped := s.pending.List(id, s.now())
	got, more := views.Paginate(views.Skip(slices.Values(recs), start), limit)
	out := make([]pendingView, 0, len(got))
	for i := range got {
		out = append(out, pendingViewOf(&got[i]))
	}
	page := map[string]any{"data": out, "total": len(recs)}
	if dropped > 0 {
		page["notKept"] = dropped
	}
	if more {
		page["nextCursor"] = strconv.Itoa(start + len(out))
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// retryNowRequest is the body of POST /v1/destinations/{id}/retry: every waiting message (no
// body, {}), or those listed.
type retryNowRequest struct {
	MessageIDs []string `json:"messageIds"`
}

// retryNowResult is what a retry-now sent.
type retryNowResult struct {
	Sent       int      `json:"sent"`
	MessageIDs []string `json:"messageIds"`
	// NotPending are the ids listed that are not waiting in a tier (delivered, dead-lettered,
	// unknown, or retried now already).
	NotPending []string `json:"notPending,omitempty"`
	// DueNow are the waiting messages left to their tier: due within retryNowLead, or past due
	// (parked behind their endpoint's breaker, or being attempted).
	DueNow []string `json:"dueNow,omitempty"`
}

// retryNowLead: a message whose tier attempts it within this long is left to its tier (the
// deliverer would skip the copy: docs/delivery.md#retry-now).
const retryNowLead = 2 * time.Second

func (s *Service) retryPending(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req retryNowRequest
	if err := decodeJSON(w, r, &req, true); err != nil {
		return err
	}
	res, err := s.retryNow(r.Context(), id, req.MessageIDs)
	if err != nil {
		return err
	}
	writeData(w, http.StatusAccepted, res)
	return nil
}

// retryNowFetchTimeout bounds the read of the tier records a retry-now copies.
const retryNowFetchTimeout = 10 * time.Second

// retryNow copies the destination's waiting messages (all, or those of ids) from their tiers
// to webhooks.deliveries with the header retry-now; the deliverer sends each once
// (docs/delivery.md#retry-now).
func (s *Service) retryNow(ctx context.Context, id string, ids []string) (retryNowResult, error) {
	res := retryNowResult{MessageIDs: []string{}}
	if _, ok := s.deps.Store.Snapshot().DestinationByID(id); !ok {
		return res, errNotFound("no destination %q", id)
	}
	for i, m := range ids {
		if strings.TrimSpace(m) == "" {
			return res, errInvalid("messageIds["+strconv.Itoa(i)+"]", "messageIds[%d]: must not be empty", i)
		}
	}
	now := s.now()
	all, notPending := s.pending.Retryable(id, ids, now)
	res.NotPending = notPending
	var recs []views.PendingRecord
	for _, r := range all {
		if r.DueAt.Before(now.Add(retryNowLead)) {
			res.DueNow = append(res.DueNow, r.MessageID)
			continue
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return res, nil
	}
	found, err := s.readTierRecords(ctx, recs)
	if err != nil {
		return res, err
	}
	var out []*kgo.Record
	var sent []string
	for i := range recs {
		key := recs[i].Key()
		t := found[key]
		if t == nil {
			res.NotPending = append(res.NotPending, recs[i].MessageID)
			continue
		}
		c := &kgo.Record{Topic: s.cfg.DeliveriesTopic, Key: t.Key, Value: t.Value}
		for _, h := range t.Headers {
			if h.Key != schemas.HeaderRetryNow {
				c.Headers = append(c.Headers, h)
			}
		}
		c.Headers = append(c.Headers, kgo.RecordHeader{Key: schemas.HeaderRetryNow, Value: []byte(key)})
		out = append(out, c)
		sent = append(sent, recs[i].MessageID)
	}
	if len(out) > 0 {
		if err := s.producer.ProduceSync(ctx, out...).FirstErr(); err != nil {
			return res, fmt.Errorf("producing the retry-now copies: %w", err)
		}
	}
	now = s.now()
	for _, c := range out {
		s.pending.Mark(string(c.Headers[len(c.Headers)-1].Value), views.RetryNowRequested, now)
	}
	res.Sent, res.MessageIDs = len(out), append(res.MessageIDs, sent...)
	s.metrics.retriedNow.Add(float64(len(out)))
	s.logger.Info().Str("destination", id).Int("sent", len(out)).Int("not_pending", len(res.NotPending)).Msg("pending retries sent now")
	s.audit(ctx, actionPendingRetry, schemas.AuditObject{Kind: "destination", ID: id}, nil, auditSent{MessageIDs: sent})
	return res, nil
}

// readTierRecords reads the tier records of recs (keyed by their RetryNowKey): each partition
// from the lowest offset wanted to the highest. A record gone meanwhile (retention) is left out.
func (s *Service) readTierRecords(ctx context.Context, recs []views.PendingRecord) (map[string]*kgo.Record, error) {
	type span struct{ from, to int64 }
	spans := map[views.TopicPartition]*span{}
	want := map[string]bool{}
	for i := range recs {
		r := &recs[i]
		want[r.Key()] = true
		tp := views.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		if sp := spans[tp]; sp == nil {
			spans[tp] = &span{r.Offset, r.Offset}
		} else {
			sp.from, sp.to = min(sp.from, r.Offset), max(sp.to, r.Offset)
		}
	}
	parts := map[string]map[int32]kgo.Offset{}
	for tp, sp := range spans {
		if parts[tp.Topic] == nil {
			parts[tp.Topic] = map[int32]kgo.Offset{}
		}
		parts[tp.Topic][tp.Partition] = kgo.NewOffset().At(sp.from)
	}
	cl, err := platform.NewKafkaClient(s.deps.Kafka, s.logger, append([]kgo.Opt{kgo.ConsumePartitions(parts),
		kgo.FetchMaxWait(100 * time.Millisecond)}, s.deps.KafkaOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("reading the retry tiers: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, retryNowFetchTimeout)
	defer cancel()
	found := map[string]*kgo.Record{}
	for len(spans) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			tp := views.TopicPartition{Topic: r.Topic, Partition: r.Partition}
			sp := spans[tp]
			if sp == nil {
				return
			}
			if k := schemas.RetryNowKey(r.Topic, r.Partition, r.Offset); want[k] {
				found[k] = r
			}
			if r.Offset >= sp.to {
				delete(spans, tp)
				cl.PauseFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}})
			}
		})
	}
	if len(found) == 0 && ctx.Err() != nil {
		return nil, &apiError{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Message: "reading the retry tiers timed out: try again"}
	}
	return found, nil
}

package console

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The dead-letter queue of a destination: listed from the console's DLQ view (views.DLQ, read by dlq_reader.go: the
// last DLQPerDestination dead letters of each destination, their headers only) and replayed
// with the deliverer's own library (platform.ReplayDeadLetters), both once per message: a
// message's newest dead letter stands for it (docs/console.md#replay-the-dead-letter-queue). A
// replayed message's new attempts show in the delivery log.

func (s *Service) replayTopics() platform.ReplayTopics {
	return platform.ReplayTopics{DLQ: s.cfg.DLQTopic, Deliveries: s.cfg.DeliveriesTopic, Replayed: s.cfg.DLQReplayedTopic,
		Suppressions: s.cfg.SuppressionsTopic, DeletionsStatus: s.cfg.DeletionsStatusTopic}
}

// deadLetterView is the API's form of a dead letter.
type deadLetterView struct {
	MessageID      string `json:"messageId"`
	Reason         string `json:"reason"`
	LastStatus     string `json:"lastStatus,omitempty"`
	LastError      string `json:"lastError,omitempty"`
	Attempts       int    `json:"attempts,omitempty"`
	FirstAttemptAt string `json:"firstAttemptAt,omitempty"`
	DeadLetteredAt string `json:"deadLetteredAt"`
	ReplayedAt     string `json:"replayedAt,omitempty"`
	URL            string `json:"url,omitempty"`
}

// listDLQ answers the destination's dead-lettered messages (each by its newest dead letter),
// newest first; replayed ones only with ?replayed=true; ?cursor= and ?limit= (100) page.
func (s *Service) listDLQ(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, ok := s.deps.Store.Snapshot().DestinationByID(id); !ok {
		return errNotFound("no destination %q", id)
	}
	q := r.URL.Query()
	limit, err := pageLimit(r, 100)
	if err != nil {
		return err
	}
	start := 0
	if c := q.Get("cursor"); c != "" {
		if start, err = strconv.Atoi(c); err != nil || start < 0 {
			return errInvalid("cursor", "cursor: not a cursor of this API: %q", c)
		}
	}
	dls, err := s.deadLetters(r.Context(), id, q.Get("replayed") == "true")
	if err != nil {
		return err
	}
	out := []deadLetterView{}
	for i := start; i < len(dls) && len(out) < limit; i++ {
		out = append(out, dls[i])
	}
	page := map[string]any{"data": out, "total": len(dls)}
	if start+len(out) < len(dls) {
		page["nextCursor"] = strconv.Itoa(start + len(out))
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// deadLetters lists the destination's dead letters, newest first (replayed ones too with
// again), from the DLQ view: the last DLQPerDestination of each destination.
func (s *Service) deadLetters(_ context.Context, id string, again bool) ([]deadLetterView, error) {
	dls := s.dlq.List(id, again)
	out := make([]deadLetterView, 0, len(dls))
	for _, d := range dls {
		v := deadLetterView{MessageID: d.MessageID, Reason: d.Reason, LastStatus: d.LastStatus, LastError: d.LastError,
			Attempts: d.Attempts, DeadLetteredAt: schemas.FormatTimestamp(d.At), URL: d.URL}
		if !d.FirstAttemptAt.IsZero() {
			v.FirstAttemptAt = schemas.FormatTimestamp(d.FirstAttemptAt)
		}
		if !d.ReplayedAt.IsZero() {
			v.ReplayedAt = schemas.FormatTimestamp(d.ReplayedAt)
		}
		out = append(out, v)
	}
	return out, nil
}

// replayRequest is the body of POST /v1/destinations/{id}/dlq/replay: every message not
// replayed yet, or those listed (each once, by its newest dead letter); to the destination's
// webhooks, or to url.
type replayRequest struct {
	MessageIDs []string `json:"messageIds"`
	URL        string   `json:"url"`
}

func (s *Service) replayDLQ(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, ok := s.deps.Store.Snapshot().DestinationByID(id); !ok {
		return errNotFound("no destination %q", id)
	}
	var req replayRequest
	if err := decodeJSON(w, r, &req, true); err != nil {
		return err
	}
	ids, sk, err := s.replay(r.Context(), id, req)
	if err != nil {
		return err
	}
	answer := map[string]any{"replayed": len(ids), "messageIds": ids}
	if len(sk.ids) > 0 {
		answer["skipped"] = len(sk.ids)
		answer["skippedMessageIds"] = sk.ids
		answer["reason"] = sk.reason()
	}
	writeData(w, http.StatusOK, answer)
	return nil
}

// skipped are the dead letters a replay left alone because their user is deleted or
// suppressed (docs/console.md#replay-the-dead-letter-queue).
type skipped struct {
	ids     []string
	reasons map[string]bool // platform.ForgetDeleted, platform.ForgetSuppressed
}

// reason says why they were skipped: "deleted user", "suppressed user", or both.
func (sk *skipped) reason() string {
	switch {
	case sk.reasons[platform.ForgetDeleted] && sk.reasons[platform.ForgetSuppressed]:
		return "deleted or suppressed user"
	case sk.reasons[platform.ForgetDeleted]:
		return "deleted user"
	}
	return "suppressed user"
}

// replay replays the destination's dead letters (all not replayed yet, or those listed) and
// returns the message ids replayed, and those skipped: a deleted or suppressed user's.
func (s *Service) replay(ctx context.Context, id string, req replayRequest) ([]string, skipped, error) {
	var sk skipped
	// One replay of a destination at a time: each reads the replay marks when it starts, so two
	// at once (a double click) would both send what neither had marked yet.
	mu, _ := s.replays.LoadOrStore(id, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if req.URL != "" {
		if err := schemas.CheckWebhookURL(req.URL); err != nil {
			return nil, sk, errInvalid("url", "url: %v", err)
		}
	}
	for i, m := range req.MessageIDs {
		if strings.TrimSpace(m) == "" {
			return nil, sk, errInvalid("messageIds["+strconv.Itoa(i)+"]", "messageIds[%d]: must not be empty", i)
		}
	}
	// Listed message ids are replayed even when they were replayed before: the user asks.
	f := platform.ReplayFilter{DestinationID: id, MessageIDs: req.MessageIDs, Again: len(req.MessageIDs) > 0}
	o := platform.ReplayOptions{URL: req.URL, Skipped: func(d platform.DeadLetter, reason string) {
		sk.ids = append(sk.ids, d.MessageID)
		if sk.reasons == nil {
			sk.reasons = map[string]bool{}
		}
		sk.reasons[reason] = true
	}}
	done, err := platform.ReplayDeadLetters(ctx, s.deps.Kafka, s.logger, s.replayTopics(), f, o)
	if err != nil {
		return nil, sk, err
	}
	ids := make([]string, 0, len(done))
	now := s.now()
	for _, d := range done {
		ids = append(ids, d.MessageID)
	}
	// The view reads the replay marks a moment later; the next list is right at once.
	s.dlq.MarkReplayed(done, now)
	s.metrics.replayed.Add(float64(len(done)))
	s.logger.Info().Str("destination", id).Int("replayed", len(done)).Int("skipped", len(sk.ids)).Bool("to_other_url", req.URL != "").Msg("DLQ replayed")
	s.audit(ctx, actionDLQReplay, schemas.AuditObject{Kind: "destination", ID: id}, nil, auditSent{URL: req.URL, MessageIDs: ids, Skipped: len(sk.ids)})
	return ids, sk, nil
}
